"""Tool registry: definitions (schemas) and calls, with tool-level errors returned as isError results."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .schema_errors import describe_schema_error

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_REPORTED_PROBLEMS = 5  # argument errors named in one answer: a few say what to fix, hundreds would only grow it


class ToolError(Exception):
    """A problem with the tool's input (empty text, text too long, unknown argument): an isError result."""


class UnknownTool(KeyError):
    pass


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def definition(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out


def tool_result(payload: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    """Every call result: JSON text content, the same JSON as structuredContent, and isError."""
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": orjson.dumps(payload).decode()}],
        "isError": is_error,
    }
    if not is_error:
        result["structuredContent"] = payload
    return result


def error_message(result: dict[str, Any]) -> str:
    """The ``error`` text of an isError result built by ``tool_result``."""
    try:
        return str(orjson.loads(result["content"][0]["text"]).get("error", "tool failed"))
    except (KeyError, IndexError, TypeError, AttributeError, orjson.JSONDecodeError):
        return "tool failed"


class ToolRegistry:
    """Open to more tools (classify_batch, select_tools): registering one is all it takes."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._quick_checks: dict[str, Callable[[dict[str, Any]], bool] | None] = {}

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered already")
        self._tools[tool.name] = tool
        self._quick_checks[tool.name] = quick_check(tool.input_schema)

    def _validator(self, name: str) -> Draft202012Validator:
        """The tool's full schema check, built at the first call that needs it: jsonschema takes a tenth of a second or
        more to import, which the MCP handshake (answered before the model loads) should not wait for."""
        validator = self._validators.get(name)
        if validator is None:
            from jsonschema import Draft202012Validator

            schema = self._tools[name].input_schema
            Draft202012Validator.check_schema(schema)
            validator = self._validators[name] = Draft202012Validator(schema)
        return validator

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def definitions(self) -> list[dict[str, Any]]:
        return [t.definition() for t in self._tools.values()]

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a tool. Raises UnknownTool; input problems come back as isError results."""
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownTool(name)
        quick = self._quick_checks[name]
        problems = (
            []
            if quick is not None and quick(arguments)
            else sorted(self._validator(name).iter_errors(arguments), key=lambda e: list(e.path))
        )
        if problems:
            return tool_result({"error": _problems_message(problems)}, is_error=True)
        try:
            payload = await tool.handler(arguments)
        except ToolError as exc:
            return tool_result({"error": str(exc)}, is_error=True)
        return tool_result(payload)


_QUICK_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float)}
_QUICK_PROPERTY_KEYS = frozenset({"type", "minLength", "maxLength", "description", "default", "title"})
_QUICK_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title"})


def quick_check(schema: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """An accept-only fast path for flat object schemas (typed properties, string lengths, required,
    additionalProperties false): True means jsonschema would accept too; False means "ask jsonschema",
    which also words the error. None when the schema uses anything else. It saves the full
    validator's ~40 us on every tools/call, a tenth of a cache hit."""
    if set(schema) - _QUICK_OBJECT_KEYS or schema.get("type") != "object" or schema.get("additionalProperties", False) is not False:
        return None
    props: dict[str, tuple[tuple[type, ...], int, int | None]] = {}
    for prop, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict) or set(sub) - _QUICK_PROPERTY_KEYS or sub.get("type") not in _QUICK_TYPES:
            return None
        props[prop] = (_QUICK_TYPES[sub["type"]], int(sub.get("minLength", 0)), sub.get("maxLength"))
    required = tuple(schema.get("required", ()))
    closed = "additionalProperties" in schema

    def check(arguments: dict[str, Any]) -> bool:
        for key in required:
            if key not in arguments:
                return False
        for key, value in arguments.items():
            spec = props.get(key)
            if spec is None:
                if closed:
                    return False
                continue
            types, min_length, max_length = spec
            if type(value) not in types:  # exact types: bool is not an int here, subclasses go to jsonschema
                return False
            if types == (str,) and (len(value) < min_length or (max_length is not None and len(value) > max_length)):
                return False
        return True

    return check


def _problems_message(problems: list[Any]) -> str:
    """The first few argument errors, each in a few words, and how many more there are."""
    message = "; ".join(describe_schema_error(e) for e in problems[:MAX_REPORTED_PROBLEMS])
    more = len(problems) - MAX_REPORTED_PROBLEMS
    return f"{message}; and {more} more problem(s)" if more > 0 else message
