"""Which shorter embedding sizes a model was trained to give (Matryoshka representation learning).

A Matryoshka model's leading ``d`` values, renormalised, are a good embedding of their own; any other model's
are not, so the OpenAI-compatible ``dimensions`` field is honoured only where the model declares this. Two
declarations are read, and nothing else is guessed:

- the model's own files: a ``matryoshka_dimensions`` list in ``config_sentence_transformers.json`` or
  ``config.json`` (the sizes it was trained at; those and the full size are allowed);
- a table of known models, for those whose cards say it in prose only: Qwen3-Embedding gives any size from
  32 up to its full one.

Torch-free: the gateway reads it without the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CONFIG_FILES = ("config_sentence_transformers.json", "config.json")
CONFIG_KEY = "matryoshka_dimensions"


@dataclass(frozen=True)
class Matryoshka:
    """The sizes a model may be cut to: exactly ``sizes`` where listed, else any size from ``minimum`` up to the full one."""

    sizes: tuple[int, ...] = ()
    minimum: int = 1

    def allows(self, dimensions: int, full: int) -> bool:
        if dimensions == full:
            return True
        if self.sizes:
            return dimensions in self.sizes and dimensions < full
        return self.minimum <= dimensions < full

    def describe(self, full: int) -> str:
        if self.sizes:
            return ", ".join(str(size) for size in sorted({*self.sizes, full}) if size <= full)
        return f"{self.minimum} to {full}"


# Known models, by the lower-cased last part of their id: the prefix names the family.
KNOWN_MODELS: dict[str, Matryoshka] = {
    "qwen3-embedding-": Matryoshka(minimum=32),  # Qwen3-Embedding-0.6B/4B/8B: "user-defined output dimensions from 32"
}


def known_matryoshka(model_id: str) -> Matryoshka | None:
    """The table's entry for ``model_id`` (a hub id, a path or a name), or None."""
    name = model_id.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower()  # hub id, path, or random:<name>
    for prefix, spec in KNOWN_MODELS.items():
        if name.startswith(prefix):
            return spec
    return None


def declared_matryoshka(model_dir: str | Path) -> Matryoshka | None:
    """A ``matryoshka_dimensions`` list in the model's own config files, or None where they declare none."""
    for name in CONFIG_FILES:
        path = Path(model_dir) / name
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        sizes = config.get(CONFIG_KEY) if isinstance(config, dict) else None
        if isinstance(sizes, list) and sizes and all(isinstance(size, int) and size > 0 for size in sizes):
            return Matryoshka(sizes=tuple(sorted(set(sizes))))
    return None


def matryoshka_of(model_id: str, model_dir: str | Path | None = None) -> Matryoshka | None:
    """The model's own declaration first, then the table; None: the model gives its full size only."""
    declared = declared_matryoshka(model_dir) if model_dir is not None and Path(model_dir).is_dir() else None
    return declared or known_matryoshka(model_id)
