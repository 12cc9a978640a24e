"""The tool filter's request and answer as pydantic models: one definition checks a request and writes its schema.

POST /v1/tools/filter and select_tools validate their arguments with ``ToolFilterRequest``, and /openapi.json
documents the filter's body from the same model, so the document and the check cannot drift; POST /v1/tools/feedback
does the same with ``ToolFeedbackRequest``. A refusal is a
``ToolError`` with a short message of our own per field: pydantic's messages carry the caller's value, and an
error must not echo the input (protocol/excerpts.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import ErrorDetails

from ..protocol.tools import ToolError
from .tool_ranking import MAX_EXAMPLES, tool_examples

DEFAULT_TOP_K = 10
MAX_CALLED = 64  # tools one feedback may name: a response calls a few; a bound keeps one post's Redis write small
NOT_A_REQUEST = "the body must be an object with a `tools` list (and `query` or `messages`)"
FIELD_RULES = {
    "query": "`query` must be a string",
    "messages": "`messages` must be a list of messages",
    "top_k": "top_k must be an integer of at least 1",
    "threshold": "threshold must be a number from -1 to 1 (a cosine similarity)",
}

_NAMED: dict[str, Any] = {
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "examples": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": MAX_EXAMPLES,
            "description": "Example user requests for the tool, beside its description: ranked as its past requests are.",
        },
    },
}
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An MCP tool {name, description, inputSchema} or an OpenAI tool {type: function, function: {...}}.",
    "if": {"required": ["type", "function"], "properties": {"type": {"const": "function"}, "function": {"type": "object"}}},
    "then": {"properties": {"function": _NAMED}},
    "else": _NAMED,
}  # what tool_fields accepts, said in JSON Schema (a pydantic union cannot say "function wins when type is function")
MESSAGE_SCHEMA: dict[str, Any] = {"description": "An OpenAI or MCP chat message {role, content}; other items are skipped."}


def _named_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """The check TOOL_SCHEMA describes: tool_fields finds the name in either shape."""
    try:
        tool_examples(tool, 0)  # reads tool_fields too
    except ToolError as exc:
        raise ValueError(str(exc)) from None
    return tool


def _whole_number(value: Any) -> Any:
    """JSON Schema counts 5.0 as an integer, so top_k does too; 5.5 and booleans stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


CallerTool = Annotated[dict[str, Any], AfterValidator(_named_tool), WithJsonSchema(TOOL_SCHEMA)]
AnsweredTool = Annotated[dict[str, Any], WithJsonSchema(TOOL_SCHEMA)]  # the caller's own tool, back as it came
ChatMessage = Annotated[Any, WithJsonSchema(MESSAGE_SCHEMA)]


class ToolFilterRequest(BaseModel):
    """Needs a non-blank `query`, or `messages` with a user message that has text (the last one is the query); a request
    with neither is refused with 400."""

    # strict: JSON's types as they are ("5" is no integer, true no number); null stands for "not given" (clients
    # serialise unset fields so); other keys are ignored
    model_config = ConfigDict(strict=True, extra="ignore")

    query: str | None = None
    messages: list[ChatMessage] | None = None
    tools: list[CallerTool]
    top_k: Annotated[int, Field(ge=1), BeforeValidator(_whole_number)] = DEFAULT_TOP_K
    threshold: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="A cosine. Omitted or null: the service's default for its model (tool_threshold; select_tools' "
        "inputSchema in tools/list shows it).",
    )


class ToolFilterAnswer(BaseModel):
    """Filtered (X-Tool-Filter: N->K), or every tool with filtered=false and the reason when the backend failed
    (X-Tool-Filter-Status: unfiltered)."""

    tools: list[AnsweredTool]
    filtered: bool
    total: int
    kept: int
    scores: list[float] | SkipJsonSchema[None] = None  # when filtered: each kept tool's cosine
    confidences: list[float] | SkipJsonSchema[None] = None  # when filtered: the probability the request needs each kept tool
    needs: int | SkipJsonSchema[None] = None  # when filtered: the separate asks found in the request
    reason: str | SkipJsonSchema[None] = None  # when not: why the filter failed open


class ToolFeedbackRequest(BaseModel):
    """Feedback from use: the request (`query`, or `messages` whose last user message is it) and the tools the model called
    for it, each as the filter was given it (its name and description identify it). Only a vector of the request is kept."""

    model_config = ConfigDict(strict=True, extra="ignore")

    query: str | None = None
    messages: list[ChatMessage] | None = None
    called: list[CallerTool] = Field(min_length=1, max_length=MAX_CALLED)


class ToolFeedbackAnswer(BaseModel):
    """stored=false with the reason when the store could not keep it (Redis unreachable): nothing was kept."""

    stored: bool
    tools: int  # distinct tools the feedback named
    reason: str | SkipJsonSchema[None] = None


FEEDBACK_RULES = {
    **FIELD_RULES,
    "called": f"`called` must be a list of 1 to {MAX_CALLED} tools the model called, each {{name, description}}",
}
NOT_FEEDBACK = "the body must be an object with a `called` list (and `query` or `messages`)"


def parse_request(body: Any) -> ToolFilterRequest:
    """The body checked against ToolFilterRequest; ToolError names the first problem, in a few words."""
    try:
        return ToolFilterRequest.model_validate(body)
    except ValidationError as exc:
        raise ToolError(_message(exc.errors(include_url=False, include_input=True)[0])) from None


def parse_feedback(body: Any) -> ToolFeedbackRequest:
    """The body checked against ToolFeedbackRequest; ToolError names the first problem, in a few words."""
    try:
        return ToolFeedbackRequest.model_validate(body)
    except ValidationError as exc:
        raise ToolError(_message(exc.errors(include_url=False, include_input=True)[0], "called", FEEDBACK_RULES, NOT_FEEDBACK)) from None


def _message(error: ErrorDetails, tools: str = "tools", rules: dict[str, str] = FIELD_RULES, otherwise: str = NOT_A_REQUEST) -> str:
    place = error["loc"]
    if len(place) < 2 or place[0] != tools:  # a field of the body, or the body itself
        return rules.get(str(place[0]), otherwise) if place else otherwise
    if error["type"] == "dict_type":
        return f"a tool must be an object, got {type(error['input']).__name__}"
    cause = (error.get("ctx") or {}).get("error")
    return str(cause) if cause is not None else "every tool needs a name"
