"""The gateway's HTTP app over a given dispatcher and backend, as `serve` builds it less Redis: the tests' way in.

`serve` builds the door's parts in wiring (build_http_app) and the lifecycle in serving; a test picks the few
parts its rule is about and takes the defaults for the rest: a lifecycle that starts and stops ``backend``,
fresh metrics, in-process SSE sessions.
"""

from __future__ import annotations

from fastapi import FastAPI

from mcp_classifier.backend.base import ClassificationBackend
from mcp_classifier.edge import EdgeGuard
from mcp_classifier.protocol.dispatcher import McpDispatcher
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.toolfilter.tool_filter import ToolFilter
from mcp_classifier.transports.http import DoorLifecycle, HttpDoorParts, create_app
from mcp_classifier.transports.openai_embeddings import EmbeddingsOptions
from mcp_classifier.transports.sse import SseSessions, local_sessions
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import DEFAULT_MAX_BODY_BYTES


def gateway_app(
    dispatcher: McpDispatcher,
    backend: ClassificationBackend,
    *,
    max_body_bytes: int,
    lifecycle: DoorLifecycle | None = None,
    metrics: GatewayMetrics | None = None,
    edge: EdgeGuard | None = None,
    tool_filter: ToolFilter | None = None,
    sse_sessions: SseSessions | None = None,
    embeddings: EmbeddingsOptions | None = None,
) -> FastAPI:
    """The app over ``dispatcher`` and ``backend``; ``lifecycle`` where the test holds the start or the services."""
    metrics = metrics or GatewayMetrics()
    dispatcher.method_observer = metrics.observe_method  # as build_http_doors sets it
    parts = HttpDoorParts(
        dispatcher=dispatcher,
        backend=backend,
        lifecycle=lifecycle or Lifecycle(backend),
        metrics=metrics,
        sse_sessions=sse_sessions or local_sessions(Settings().serving, metrics, max_body_bytes),
        max_body_bytes=max_body_bytes,
        edge=edge,
        tool_filter=tool_filter,
        embeddings=embeddings or EmbeddingsOptions(),
    )
    return create_app(parts)


def tool_filter_app(settings: Settings, backend: ClassificationBackend, metrics: GatewayMetrics | None = None) -> FastAPI:
    """The app with the tool filter ``settings`` build over ``backend`` (as wiring builds it), its dispatcher serving
    select_tools: the tool filter's tests' gateway."""
    tool_filter = build_tool_filter(settings, backend)
    dispatcher = build_dispatcher(settings, backend, tool_filter)
    return gateway_app(dispatcher, backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, tool_filter=tool_filter, metrics=metrics)
