"""A tool's argument errors in a few words: where, which rule, which limit; never the caller's value.

jsonschema's own messages start with the whole offending instance (``[...] is too long``), so a
request of 900 KB would get a 900 KB error back. These are built from the error's parts instead, with the
value described by ``excerpts`` (its type, size or a short prefix).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from .excerpts import MAX_LISTED_NAMES, clip, describe_value, excerpt, name_list

if TYPE_CHECKING:
    from jsonschema import ValidationError

_TYPE_WORDS = {
    "string": "a string",
    "array": "an array",
    "object": "an object",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}
_BOUNDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
    "multipleOf": "a multiple of",
}


def describe_schema_error(error: ValidationError) -> str:
    """One short sentence for one jsonschema error of a tool's arguments."""
    where = ".".join(str(part) for part in error.absolute_path)
    subject = f"argument {excerpt(where)}" if where else "the arguments"
    rule = error.validator
    limit: Any = error.validator_value  # the schema's value for the rule: a length, a type name, the required names
    value: Any = error.instance
    if rule == "required":
        missing = [name for name in limit if isinstance(value, dict) and name not in value]
        return f"missing required argument(s): {name_list(missing)}"
    if rule == "additionalProperties":
        extras = _unknown_keys(value, error.schema if isinstance(error.schema, dict) else {})
        return f"unknown argument(s): {name_list(extras)}" if not where else f"{subject} has unknown key(s): {name_list(extras)}"
    if rule == "type":
        return f"{subject} must be {_type_words(limit)}, not {describe_value(value)}"
    if rule == "maxLength":
        return f"{subject} is longer than {limit} characters"
    if rule == "minLength":
        return empty_text(subject) if limit <= 1 else f"{subject} is shorter than {limit} characters"
    if rule == "maxItems":
        return f"{subject} has {_size(value)} items: at most {limit} are allowed"
    if rule == "minItems":
        return f"{subject} must not be empty" if limit <= 1 else f"{subject} has {_size(value)} item(s): at least {limit} are needed"
    if rule in _BOUNDS:
        return f"{subject} must be {_BOUNDS[str(rule)]} {limit}, not {describe_value(value)}"
    if rule == "enum":
        return f"{subject} must be one of {_json_list(limit)}, not {describe_value(value)}"
    if rule == "const":
        return f"{subject} must be {_json_list([limit])}, not {describe_value(value)}"
    if rule == "pattern":
        return f"{subject} must match the pattern {excerpt(str(limit))}"
    return f"{subject} {'break' if not where else 'breaks'} the schema's {rule!r} rule"


def empty_text(subject: str) -> str:
    """One wording for "" (the schema's minLength) and for whitespace-only text (the tool's own check): to the
    caller both are the same mistake."""
    return f"{subject} is empty: it has no visible characters"


def _unknown_keys(value: Any, schema: dict[str, Any]) -> list[str]:
    if not isinstance(value, dict):
        return []
    known = schema.get("properties") or {}
    patterns = list(schema.get("patternProperties") or {})
    return [key for key in value if key not in known and not any(re.search(p, key) for p in patterns)]


def _type_words(types: str | Iterable[str]) -> str:
    names = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPE_WORDS.get(name, name) for name in names)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, list | dict | str) else 0


def _json_list(values: Iterable[Any]) -> str:
    """Values the schema allows, as JSON, each cut short (a schema is ours, but an enum may be long)."""
    items = [clip(orjson.dumps(v).decode()) for v in values]
    shown = ", ".join(items[:MAX_LISTED_NAMES])
    return f"{shown} and {len(items) - MAX_LISTED_NAMES} more" if len(items) > MAX_LISTED_NAMES else shown
