"""What /openapi.json says about each route: bodies, answers and status codes, as the handlers behave.

The handlers read raw bodies (to enforce the size limit while streaming and to keep JSON-RPC's own
error shapes), so FastAPI cannot infer their bodies from type hints; each route passes one of
these as `openapi_extra`. The bodies' and answers' schemas come from pydantic models (wire_models.py, and
the tool filter's own, which also check its requests): what is written here is what a model cannot say,
the summaries, the headers and the SSE stream. schemathesis checks the served document against the running
app (tests/integration/test_fuzz_openapi.py), so a handler that drifts from its description fails there.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..toolfilter.filter_models import ToolFeedbackAnswer, ToolFeedbackRequest, ToolFilterAnswer, ToolFilterRequest
from .wire_models import ErrorBody, HealthAnswer, JsonRpcAnswer, JsonRpcMessage, LabelScore, ReadyAnswer, RouterClassifyRequest

JSON = "application/json"
REF = "#/components/schemas/{model}"
_COMPONENTS: dict[str, Any] = {}  # every model named below, and the models they nest: filled as this module loads


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """A $ref to ``model``'s schema; the schema, and those of the models it nests, go into ``components()``."""
    schema = model.model_json_schema(ref_template=REF)
    for name, sub in {**schema.pop("$defs", {}), model.__name__: schema}.items():
        if _COMPONENTS.setdefault(name, sub) != sub:
            raise ValueError(f"two different schemas named {name} for /openapi.json")
    return {"$ref": REF.format(model=model.__name__)}


def components() -> dict[str, Any]:
    """The schemas the $refs of this module point to, for the document's components.schemas."""
    return dict(_COMPONENTS)


ERROR_BODY = schema_of(ErrorBody)
JSONRPC_MESSAGE = schema_of(JsonRpcMessage)
JSONRPC_ANSWER = schema_of(JsonRpcAnswer)
JSONRPC_MESSAGES = {"anyOf": [JSONRPC_MESSAGE, {"type": "array", "items": JSONRPC_MESSAGE}]}  # one, or a batch


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(description, ERROR_BODY)


EDGE_REFUSALS: dict[str, Any] = {  # the edge guard's, in front of every documented route but /health, /ready, /metrics
    "401": _error("Missing or unknown API key (when keys are configured)."),
    "403": _error("Origin or Host not allowed."),
    "429": _error("Rate limit exceeded (Retry-After says when to come back)."),
}


def _answers(ok: dict[str, Any], *errors: int) -> dict[str, Any]:
    described = {
        400: "Malformed body or bad arguments.",
        404: "Unknown method.",
        413: "Body over max_body_bytes.",
        503: "The model backend is unavailable or overloaded: retry on another replica or later.",
        504: "The model backend did not answer within the deadline.",
    }
    return {"200": ok, **{str(status): _error(described[status]) for status in errors}, **EDGE_REFUSALS}


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": schema}}}


MCP_JSONRPC: dict[str, Any] = {
    "summary": "MCP over JSON-RPC (Streamable HTTP, stateless): one message or a batch; MCP 2026-07-28 by header",
    "description": "Without MCP-Protocol-Version, or with a handshake-era version, the handshake era answers (protocol errors "
    "with HTTP 200). With 2026-07-28 (or any version not of the handshake era) the stateless revision answers: one message "
    "per POST, params._meta required, routing headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) checked against the body, "
    "errors with HTTP 400 or 404. The headers are described here rather than declared as parameters: a schema cannot say "
    "which bodies each header value makes valid.",
    "requestBody": _body(JSONRPC_MESSAGES),
    "responses": {
        "200": _json(
            "The answer (an array for a batch). Handshake era: protocol errors are JSON-RPC errors with HTTP 200.",
            {"anyOf": [JSONRPC_ANSWER, {"type": "array", "items": JSONRPC_ANSWER}]},
        ),
        "202": {"description": "Only notifications or responses were sent: nothing to answer."},
        "400": _json(
            "2026-07-28: parse error, invalid request or params (missing _meta), header mismatch (-32020) or unsupported version (-32022).",
            JSONRPC_ANSWER,
        ),
        "404": _json("2026-07-28: unknown or removed method (-32601).", JSONRPC_ANSWER),
        "413": _json("Body over max_body_bytes.", JSONRPC_ANSWER),
        **EDGE_REFUSALS,
    },
}

MCP_REST: dict[str, Any] = {
    "summary": "MCP, REST style: POST /mcp/<method> with the params object as the body",
    "description": "Methods: initialize, tools/list, tools/call, resources/list, prompts/list, ping. The body is the "
    'params object, or an mcp-go envelope {"method": ..., "params": {...}}; an empty body is {}.',
    "requestBody": _body(
        {"type": "object", "description": "The method's MCP params: tools/call takes {name, arguments}; ping and the lists take {}."},
        required=False,
    ),
    "responses": _answers(_json("The method's MCP result.", {"type": "object"}), 400, 404, 413, 503, 504),
}

TOOL_FILTER: dict[str, Any] = {
    "summary": "Semantic tool filter for proxies: the caller's tools back, filtered and ordered, in their own shape",
    "requestBody": _body(schema_of(ToolFilterRequest)),
    "responses": _answers(
        {
            "description": "The caller's tools, kept and ordered; every tool, with filtered=false and the reason, when the backend failed.",
            "headers": {
                "X-Tool-Filter": {"description": "How many tools came and how many are kept: N->K.", "schema": {"type": "string"}},
                "X-Tool-Filter-Status": {
                    "description": "filtered, or unfiltered when the filter failed open.",
                    "schema": {"enum": ["filtered", "unfiltered"]},
                },
            },
            "content": {JSON: {"schema": schema_of(ToolFilterAnswer)}},
        },
        400,
        413,
    ),
}

TOOL_FEEDBACK: dict[str, Any] = {
    "summary": "Feedback from use: the tools the model called for a request; the filter keeps a vector of the request per tool",
    "description": "Only the request's query vector is kept (never its text), per tool, at most tool_feedback_max_vectors, "
    "for tool_feedback_ttl_s, in Redis shared by every gateway. Later requests like this one rank these tools higher.",
    "requestBody": _body(schema_of(ToolFeedbackRequest)),
    "responses": {
        **_answers(_json("Kept; or stored=false with the reason, nothing kept.", schema_of(ToolFeedbackAnswer)), 400, 413, 503, 504),
        "404": _error("Feedback from use is off on this service (tool_feedback)."),
    },
}

SSE_STREAM: dict[str, Any] = {
    "summary": "Legacy HTTP+SSE (MCP 2024-11-05): open a session's event stream",
    "description": "The first event is `endpoint`: its data is the URL to POST the session's messages to "
    "(/messages?sessionId=<id>). Each answer then arrives as a `message` event whose data is the JSON-RPC answer. "
    "Keep-alive comments flow every sse_keepalive_s; a session with no message for sse_session_idle_s ends its stream.",
    "responses": {
        "200": {"description": "The event stream (it stays open).", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
        "503": _error(
            "This replica holds sse_max_streams streams, or is shutting down: Retry-After says when to open "
            "one again (another replica may take it)."
        ),
        **EDGE_REFUSALS,
    },
}

SSE_MESSAGES: dict[str, Any] = {
    "summary": "Legacy HTTP+SSE: one JSON-RPC message (or batch) for a session; its answer goes out on the session's stream",
    "parameters": [
        {
            "name": "sessionId",
            "in": "query",
            "required": True,
            "schema": {"type": "string"},
            "description": "The session, from the `endpoint` event of GET /sse.",
        }
    ],
    "requestBody": _body(JSONRPC_MESSAGES),
    "responses": {
        "202": {
            "description": "Accepted: the answer (if one is owed) is on the session's stream.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        "400": _error("No sessionId."),
        "404": _error("No replica holds the session (unknown or expired): open a new stream."),
        "413": _error("Body over max_body_bytes."),
        **EDGE_REFUSALS,
    },
}

HEALTH: dict[str, Any] = {
    "summary": "Model, categories, where embedder calls go, cache and Redis state (never requires a key)",
    "responses": {"200": _json("The gateway's state.", schema_of(HealthAnswer))},
}

READY: dict[str, Any] = {
    "summary": "Readiness: 200 when the backend answers; 503 when it does not, or while draining after SIGTERM",
    "responses": {
        "200": _json("Ready.", schema_of(ReadyAnswer)),
        "503": _json("Not ready.", schema_of(ReadyAnswer)),
    },
}

METRICS: dict[str, Any] = {
    "summary": "Prometheus metrics",
    "responses": {"200": {"description": "Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
}

_LABEL_DISTRIBUTION = {"type": "array", "items": schema_of(LabelScore)}
ROUTER_CLASSIFY: dict[str, Any] = {
    "summary": "The vLLM Semantic Router's remote classifier (label_distribution.v1): label scores for the default classifier",
    "description": "inputs a text: one array of {label, score} over every category (and the file's fallback_label), each "
    "label once, scores in [0, 1] that sum to 1, or independent per-label scores for a multi_label file. inputs a list: "
    "a list of such arrays, one per text, in order. Keys other than inputs are ignored.",
    "requestBody": _body(schema_of(RouterClassifyRequest)),
    "responses": _answers(
        {
            "description": "The label distribution, or one per input when inputs is a list.",
            "headers": {
                "X-Model": {"description": "The model that decided (_meta's model_id).", "schema": {"type": "string"}},
                "X-Category-Set-Version": {"description": "The categories' version (_meta's).", "schema": {"type": "string"}},
                "X-Policy-Version": {"description": "The routing policy's version (_meta's).", "schema": {"type": "string"}},
            },
            "content": {JSON: {"schema": {"anyOf": [_LABEL_DISTRIBUTION, {"type": "array", "items": _LABEL_DISTRIBUTION}]}}},
        },
        400,
        413,
        503,
        504,
    ),
}

NAMED_CLASSIFY: dict[str, Any] = {
    **ROUTER_CLASSIFY,
    "summary": "The router's remote classifier (label_distribution.v1) for the classifier NAME (the classifiers setting)",
    "responses": {
        **ROUTER_CLASSIFY["responses"],
        "404": _error("No classifier of that name is served; the message lists the names that are."),
    },
}
