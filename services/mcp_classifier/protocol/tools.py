"""Tool registry: definitions (schemas) and calls, with tool-level errors returned as isError results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import orjson
from jsonschema import Draft202012Validator

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


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


class ToolRegistry:
    """Open to more tools (classify_batch, select_tools): registering one is all it takes."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered already")
        Draft202012Validator.check_schema(tool.input_schema)
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.input_schema)

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
        problems = sorted(self._validators[name].iter_errors(arguments), key=lambda e: list(e.path))
        if problems:
            return tool_result({"error": "; ".join(_describe(e) for e in problems)}, is_error=True)
        try:
            payload = await tool.handler(arguments)
        except ToolError as exc:
            return tool_result({"error": str(exc)}, is_error=True)
        return tool_result(payload)


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.path)
    if error.validator == "maxLength":
        return f"argument {where!r} is longer than {error.validator_value} characters"
    if error.validator == "minLength":
        return f"argument {where!r} must not be empty"
    if error.validator == "additionalProperties":
        return f"unknown argument(s): {error.message.split('(')[-1].rstrip(')')}"
    return f"argument {where!r}: {error.message}" if where else error.message
