"""Labelled queries from JSONL or CSV: text, category, and optionally expected_use_reasoning and a tag.

The category may be written `label`; null (JSON) or `null` (CSV) marks a query that fits none of the
categories, which the service should answer out of scope. `also` names other categories a query is about too
(a query about two topics): an answer naming one of them counts as right, as its own label does.

The tag (a `style` or `tag` column: chat, terse, noisy, multi-topic, ...) lets eval report accuracy per
kind of traffic, where one overall figure hides the weak spot.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
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
    also: tuple[str, ...] = ()  # other categories the query is about too: an answer naming one of them is right


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


def _also(value: object, where: str) -> tuple[str, ...]:
    """`also`: a second category (a query about two topics), a list of them, or none; a CSV cell may list them
    separated by "|"."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split("|") if part.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise DatasetError(f"{where}: `also` must be a category name or a list of them")


def query_topics(queries: Sequence[LabelledQuery]) -> list[tuple[str, ...]]:
    """Each query's categories, main first and then its `also`; none for an out-of-scope query (what labels should name)."""
    return [(query.category, *query.also) if query.category != OUT_OF_SCOPE else () for query in queries]


def accepted_labels(queries: Sequence[LabelledQuery], predicted: Sequence[str]) -> list[str]:
    """Each query's label as scored: the category answered when it is one of the query's `also` categories (a
    query about two topics is answered right by either), else its own label."""
    return [answer if answer in query.also else query.category for query, answer in zip(queries, predicted)]


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
        also = _also(row.get("also"), where) if category != OUT_OF_SCOPE else ()
        queries.append(LabelledQuery(text, category, _flag(row.get("expected_use_reasoning"), where), tag, also))
    if not queries:
        raise DatasetError(f"{path}: no labelled rows found")
    return queries
