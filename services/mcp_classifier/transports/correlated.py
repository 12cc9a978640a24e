"""Correlation at the HTTP edge: each API request opens its record, gets ``X-Trace-Id`` back and leaves one log line.

A raw ASGI middleware (like the edge guard) so it costs no extra task per request. It sits
outside the edge guard, so refusals (401, 403, 429) are logged and carry a trace id too. Open
routes (probes, metrics) and the long-lived streams (``GET /sse``, ``/ws``: they log per message)
are passed through untouched.
"""

from __future__ import annotations

from typing import Any

from ..edge.middleware import ASGIApp, Receive, Scope, Send
from ..protocol import correlation
from ..protocol.correlation import DoorObserver

UNLOGGED_PATHS = frozenset({"/health", "/ready", "/metrics", "/openapi.json", "/sse", "/ws"})
TOOL_FILTER_PATH = "/v1/tools/filter"
TOOL_FEEDBACK_PATH = "/v1/tools/feedback"  # the tool filter's door too
OPENAI_DOOR_PATHS = ("/v1/embeddings", "/v1/models")  # the OpenAI-compatible routes (transports.openai_embeddings)
DOOR_OF_PATH = {"/mcp": "http", "/messages": "sse", TOOL_FILTER_PATH: "tool_filter", "/classify": "classify"}  # and /mcp/<method>: rest
DOOR_OF_PATH.update({TOOL_FEEDBACK_PATH: "tool_filter", **dict.fromkeys(OPENAI_DOOR_PATHS, "openai")})


def door_of(path: str) -> str:
    if path.startswith("/mcp/"):
        return "rest"
    if path.startswith("/classifiers/"):
        return "classify"  # POST /classifiers/NAME/classify: the router's door, for a named classifier
    return DOOR_OF_PATH.get(path) or path.strip("/").replace("/", "_") or "root"


class CorrelationMiddleware:
    def __init__(self, app: ASGIApp, observer: DoorObserver | None = None) -> None:
        self.app = app
        self.observer = observer  # each request's door, outcome and latency go to the metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNLOGGED_PATHS:
            await self.app(scope, receive, send)
            return
        traceparent = None
        for name, value in scope["headers"]:
            if name == b"traceparent":
                traceparent = value.decode("latin-1")
                break
        record = correlation.begin(door_of(scope["path"]), traceparent=traceparent, observer=self.observer)

        async def send_with_trace_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                # read now, not at begin: a traceparent in the body's _meta may have replaced it
                message["headers"] = [*message.get("headers", []), (correlation.TRACE_ID_HEADER.encode(), record.trace_id.encode())]
                if message["status"] >= 400 and record.outcome == "ok":
                    record.outcome = f"http_{message['status']}"
            await send(message)

        try:
            await self.app(scope, receive, send_with_trace_id)
        except BaseException:
            record.outcome = "internal_error" if record.outcome == "ok" else record.outcome
            raise
        finally:
            correlation.finish(record)
