"""The languages a model's card declares (the ``language:`` key of its README's front matter)."""

from __future__ import annotations

from pathlib import Path

import yaml

MULTILINGUAL = "multilingual"  # the hub's tag for a model trained on many languages


def declared_languages(model_dir: str | Path) -> tuple[str, ...]:
    """The card's language codes, lower case; empty where it declares none or says multilingual (every language)."""
    card = Path(model_dir) / "README.md"
    if not card.is_file():
        return ()
    text = card.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return ()
    front, _, _ = text[3:].partition("\n---")
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError:
        return ()
    languages = meta.get("language") if isinstance(meta, dict) else None
    if isinstance(languages, str):
        languages = [languages]
    if not isinstance(languages, list):
        return ()
    codes = tuple(sorted({str(code).strip().lower().split("-")[0] for code in languages if str(code).strip()}))
    return () if MULTILINGUAL in codes else codes
