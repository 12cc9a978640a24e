"""Labelled queries from JSONL or CSV: text, category, and optionally expected_use_reasoning and a tag.

The category may be written `label`; null (JSON) or `null` (CSV) marks a query that fits none of the
categories, which the service should answer out of scope.

The tag (a `style` or `tag` column: chat, terse, noisy, multi-topic, ...) lets eval report accuracy per
kind of traffic, where one overall figure hides the weak spot.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path


class DatasetError(ValueError):
    pass


OUT_OF_SCOPE = "(out of scope)"  # the label of a query that fits no category, in data and in predictions


@dataclass(frozen=True)
class LabelledQuery:
    text: str
    category: str
    expected_use_reasoning: bool | None = None
    tag: str | None = None


_TRUE = {"true", "1", "yes", "y"}
_FALSE = {"false", "0", "no", "n"}


def _flag(value: object, where: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise DatasetError(f"{where}: expected_use_reasoning must be true/false, got {value!r}")


def load_dataset(path: Path) -> list[LabelledQuery]:
    """Rows with an empty text are skipped (CSV exports often end with one); anything else bad is an error."""
    if not path.is_file():
        raise DatasetError(f"data file not found: {path}")
    rows: list[tuple[str, dict]] = []
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        for number, line in enumerate(path.read_text("utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"{path}:{number}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: not valid JSON: {exc}") from exc
    elif path.suffix.lower() in (".csv", ".tsv"):
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
            rows = [(f"{path}:{n}", row) for n, row in enumerate(reader, start=2)]
    else:
        raise DatasetError(f"{path}: use .jsonl or .csv (got {path.suffix or 'no suffix'})")
    queries = []
    for where, row in rows:
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: each row must be an object with text and category")
        key = "category" if "category" in row else "label"
        raw_category = row.get(key)
        text, category = (row.get("text") or "").strip(), str(raw_category or "").strip()
        if not text:
            continue
        if (key in row and raw_category is None) or category.lower() == "null":
            category = OUT_OF_SCOPE
        elif not category:
            raise DatasetError(f"{where}: row has text but no category (null marks an out-of-scope query)")
        tag = str(row.get("tag") or row.get("style") or row.get("kind") or "").strip() or None
        queries.append(LabelledQuery(text, category, _flag(row.get("expected_use_reasoning"), where), tag))
    if not queries:
        raise DatasetError(f"{path}: no labelled rows found")
    return queries
