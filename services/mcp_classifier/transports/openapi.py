"""What /openapi.json says about each route: bodies, answers and status codes, as the handlers behave.

The handlers read raw bodies (to enforce the size limit while streaming and to keep JSON-RPC's own
error shapes), so FastAPI cannot infer their bodies from type hints; each route passes one of
these as `openapi_extra`. schemathesis checks the served document against the running app
(tests/integration/test_fuzz_openapi.py), so a handler that drifts from its description fails there.
"""

from __future__ import annotations

from typing import Any

JSON = "application/json"

ERROR_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "data": {
            "type": "object",
            "description": "eventId (in the log line of this failure), traceId, and what the error adds.",
            "properties": {"eventId": {"type": "string"}, "traceId": {"type": "string"}},
        },
    },
    "required": ["error"],
}
JSONRPC_ID: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
JSONRPC_MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": JSONRPC_ID,
        "method": {"type": "string"},
        "params": {"type": "object"},
    },
    "required": ["jsonrpc", "method"],
}
JSONRPC_ANSWER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "jsonrpc": {"type": "string", "enum": ["2.0"]},
        "id": JSONRPC_ID,
        "result": {},
        "error": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}},
    },
    "required": ["jsonrpc"],
}
_NAMED: dict[str, Any] = {"required": ["name"], "properties": {"name": {"type": "string", "minLength": 1}}}
TOOL: dict[str, Any] = {
    "type": "object",
    "description": "An MCP tool {name, description, inputSchema} or an OpenAI tool {type: function, function: {...}}.",
    "if": {"required": ["type", "function"], "properties": {"type": {"const": "function"}, "function": {"type": "object"}}},
    "then": {"properties": {"function": _NAMED}},
    "else": _NAMED,
}
MESSAGE: dict[str, Any] = {"description": "An OpenAI or MCP chat message {role, content}; other items are skipped."}


def _answers(ok: dict[str, Any], *errors: int) -> dict[str, Any]:
    described = {
        400: "Malformed body or bad arguments.",
        401: "Missing or unknown API key (when keys are configured).",
        403: "Origin or Host not allowed.",
        404: "Unknown method.",
        413: "Body over max_body_bytes.",
        429: "Rate limit exceeded (Retry-After says when to come back).",
        503: "The model backend is unavailable or overloaded: retry on another replica or later.",
        504: "The model backend did not answer within the deadline.",
    }
    out = {"200": ok}
    for status in (*errors, 401, 403, 429):
        out[str(status)] = {"description": described[status], "content": {JSON: {"schema": ERROR_BODY}}}
    return out


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {JSON: {"schema": schema}}}


MCP_JSONRPC: dict[str, Any] = {
    "summary": "MCP over JSON-RPC (Streamable HTTP, stateless): one message or a batch; MCP 2026-07-28 by header",
    "description": "Without MCP-Protocol-Version, or with a handshake-era version, the handshake era answers (protocol errors "
    "with HTTP 200). With 2026-07-28 (or any version not of the handshake era) the stateless revision answers: one message "
    "per POST, params._meta required, routing headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) checked against the body, "
    "errors with HTTP 400 or 404. The headers are described here rather than declared as parameters: a schema cannot say "
    "which bodies each header value makes valid.",
    "requestBody": _body({"anyOf": [JSONRPC_MESSAGE, {"type": "array", "items": JSONRPC_MESSAGE}]}),
    "responses": {
        "200": {
            "description": "The answer (an array for a batch). Handshake era: protocol errors are JSON-RPC errors with HTTP 200.",
            "content": {JSON: {"schema": {"anyOf": [JSONRPC_ANSWER, {"type": "array", "items": JSONRPC_ANSWER}]}}},
        },
        "202": {"description": "Only notifications or responses were sent: nothing to answer."},
        "400": {
            "description": "2026-07-28: parse error, invalid request or params (missing _meta), header mismatch (-32020) or "
            "unsupported version (-32022).",
            "content": {JSON: {"schema": JSONRPC_ANSWER}},
        },
        "404": {"description": "2026-07-28: unknown or removed method (-32601).", "content": {JSON: {"schema": JSONRPC_ANSWER}}},
        "413": {"description": "Body over max_body_bytes.", "content": {JSON: {"schema": JSONRPC_ANSWER}}},
        "401": {"description": "Missing or unknown API key.", "content": {JSON: {"schema": ERROR_BODY}}},
        "403": {"description": "Origin or Host not allowed.", "content": {JSON: {"schema": ERROR_BODY}}},
        "429": {"description": "Rate limit exceeded.", "content": {JSON: {"schema": ERROR_BODY}}},
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
    "responses": _answers(
        {"description": "The method's MCP result.", "content": {JSON: {"schema": {"type": "object"}}}}, 400, 404, 413, 503, 504
    ),
}

TOOL_FILTER: dict[str, Any] = {
    "summary": "Semantic tool filter for proxies: the caller's tools back, filtered and ordered, in their own shape",
    "requestBody": _body(
        {
            "type": "object",
            "description": "Needs a non-blank `query`, or `messages` with a user message that has text (the last one is "
            "the query); a request with neither is refused with 400.",
            "properties": {
                # null stands for "not given" (clients serialise unset fields so): the handler takes it as absent
                "query": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "messages": {"anyOf": [{"type": "array", "items": MESSAGE}, {"type": "null"}]},
                "tools": {"type": "array", "items": TOOL},
                "top_k": {"type": "integer", "minimum": 1},
                "threshold": {
                    "anyOf": [{"type": "number", "minimum": -1, "maximum": 1}, {"type": "null"}],
                    "description": "A cosine. Omitted or null: the service's default for its model (tool_threshold; "
                    "select_tools' inputSchema in tools/list shows it).",
                },
            },
            "required": ["tools"],
        }
    ),
    "responses": _answers(
        {
            "description": "Filtered (X-Tool-Filter: N->K), or every tool with filtered=false and the reason when the backend "
            "failed (X-Tool-Filter-Status: unfiltered).",
            "content": {
                JSON: {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "tools": {"type": "array", "items": TOOL},
                            "filtered": {"type": "boolean"},
                            "total": {"type": "integer"},
                            "kept": {"type": "integer"},
                            "scores": {"type": "array", "items": {"type": "number"}},
                            "reason": {"type": "string"},
                        },
                        "required": ["tools", "filtered", "total", "kept"],
                    }
                }
            },
        },
        400,
        413,
    ),
}

SSE_STREAM: dict[str, Any] = {
    "summary": "Legacy HTTP+SSE (MCP 2024-11-05): open a session's event stream",
    "description": "The first event is `endpoint`: its data is the URL to POST the session's messages to "
    "(/messages?sessionId=<id>). Each answer then arrives as a `message` event whose data is the JSON-RPC answer. "
    "Keep-alive comments flow every sse_keepalive_s; a session with no message for sse_session_idle_s ends its stream.",
    "responses": {
        "200": {"description": "The event stream (it stays open).", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
        "503": {
            "description": "This replica holds sse_max_streams streams, or is shutting down: Retry-After says when to open "
            "one again (another replica may take it).",
            "content": {JSON: {"schema": ERROR_BODY}},
        },
        "401": {"description": "Missing or unknown API key.", "content": {JSON: {"schema": ERROR_BODY}}},
        "403": {"description": "Origin or Host not allowed.", "content": {JSON: {"schema": ERROR_BODY}}},
        "429": {"description": "Rate limit exceeded.", "content": {JSON: {"schema": ERROR_BODY}}},
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
    "requestBody": _body({"anyOf": [JSONRPC_MESSAGE, {"type": "array", "items": JSONRPC_MESSAGE}]}),
    "responses": {
        "202": {
            "description": "Accepted: the answer (if one is owed) is on the session's stream.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        "400": {"description": "No sessionId.", "content": {JSON: {"schema": ERROR_BODY}}},
        "404": {
            "description": "No replica holds the session (unknown or expired): open a new stream.",
            "content": {JSON: {"schema": ERROR_BODY}},
        },
        "413": {"description": "Body over max_body_bytes.", "content": {JSON: {"schema": ERROR_BODY}}},
        "401": {"description": "Missing or unknown API key.", "content": {JSON: {"schema": ERROR_BODY}}},
        "403": {"description": "Origin or Host not allowed.", "content": {JSON: {"schema": ERROR_BODY}}},
        "429": {"description": "Rate limit exceeded.", "content": {JSON: {"schema": ERROR_BODY}}},
    },
}

HEALTH: dict[str, Any] = {
    "summary": "Model, categories, where embedder calls go, cache and Redis state (never requires a key)",
    "responses": {"200": {"description": "status ok, or degraded with the error.", "content": {JSON: {"schema": {"type": "object"}}}}},
}

READY: dict[str, Any] = {
    "summary": "Readiness: 200 when the backend answers; 503 when it does not, or while draining after SIGTERM",
    "responses": {
        "200": {"description": "Ready.", "content": {JSON: {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}},
        "503": {
            "description": "Not ready.",
            "content": {JSON: {"schema": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}},
        },
    },
}

METRICS: dict[str, Any] = {
    "summary": "Prometheus metrics",
    "responses": {"200": {"description": "Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
}
