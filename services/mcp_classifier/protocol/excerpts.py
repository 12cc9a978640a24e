"""Bounded descriptions of a caller's values, for error messages: they say what is wrong and never echo the input.

A message that repeats the offending value grows with the request: 300 texts of 3 KB would come back as
a 900 KB error. Every message built from a caller's value goes through here, so an error names the place,
the rule and the limit with at most a short prefix of the value, whatever the request's size.
"""

from __future__ import annotations

MAX_ECHO_CHARS = 40  # the most of a caller's string an error repeats: enough to recognise it, never the input itself
MAX_LISTED_NAMES = 5  # unknown argument names listed by name before "and N more"


def excerpt(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` quoted, cut to ``limit`` characters with its full length said when it is longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` unquoted and cut to ``limit`` characters: for a machine-read field that names the caller's value."""
    return text if len(text) <= limit else text[:limit] + "..."


def describe_value(value: object) -> str:
    """What a JSON value is, in a few words: a string's prefix, an array's or object's size, a scalar itself."""
    if isinstance(value, str):
        return f"the string {excerpt(value)}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        text = repr(value)
        return text if len(text) <= MAX_ECHO_CHARS else f"a number of {len(text)} digits"
    if isinstance(value, list):
        return f"an array of {len(value)} item(s)"
    if isinstance(value, dict):
        return f"an object with {len(value)} key(s)"
    return f"a {type(value).__name__}"


def name_list(names: list[str]) -> str:
    """A few names, each cut short, then how many more: for lists of unknown or missing keys."""
    shown = ", ".join(excerpt(name) for name in names[:MAX_LISTED_NAMES])
    rest = len(names) - MAX_LISTED_NAMES
    return f"{shown} and {rest} more" if rest > 0 else shown
