"""FastAPI app factory: POST /mcp (JSON-RPC), POST /mcp/<method> (REST style), the tool filter and its feedback, health,
readiness, metrics, /openapi.json."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..backend.base import ClassificationBackend
from ..classify.results import ClassifierInfo
from ..classify.scope_stats import public_scope
from ..edge import EdgeGuard, EdgeMiddleware
from ..protocol import correlation
from ..protocol.dispatcher import McpDispatcher
from ..protocol.errors import ErrorKind
from ..protocol.excerpts import clip, excerpt
from ..protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError
from ..protocol.tools import ToolError
from ..settings import ServingSettings
from ..telemetry import GatewayMetrics
from ..toolfilter.tool_filter import ToolFilter, filter_arguments
from . import openapi
from .bodies import BodyTooLarge, body_too_large, json_response, read_body, read_json, refusal, rest_error
from .correlated import TOOL_FILTER_PATH, CorrelationMiddleware
from .jsonrpc_post import answer_post
from .mcp_paths import McpPathMiddleware
from .openai_embeddings import OPENAI_PATHS, EmbeddingsOptions, add_openai_routes
from .route_labels import OPENAPI_PATH, REST_METHODS, route_label
from .router_classify import RouterClassifyLimits, add_router_classify_route
from .sse import SseSessions, add_sse_routes
from .tool_feedback import add_tool_feedback_route
from .websocket import add_websocket_route

log = logging.getLogger(__name__)

_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


def rest_params(body: Any) -> dict[str, Any]:
    """REST body: the params object itself, or an mcp-go envelope {"method": "", "params": {...}}."""
    if not isinstance(body, dict):
        raise JsonRpcError(INVALID_REQUEST, "the request body must be a JSON object")
    if body and set(body) <= _ENVELOPE_KEYS and ("params" in body or "method" in body or "jsonrpc" in body):
        params = body.get("params") or {}
        if not isinstance(params, dict):
            raise JsonRpcError(INVALID_PARAMS, '"params" must be an object')
        return params
    return body


def _openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, less the 422 answers it adds for path parameters (no route here answers 422), with the
    schemas of the bodies the handlers read themselves (transports.openapi)."""
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=__version__, routes=app.routes)
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            document.get("components", {}).get("schemas", {}).pop(name, None)
        document.setdefault("components", {}).setdefault("schemas", {}).update(openapi.components())
        app.openapi_schema = document
    return app.openapi_schema


NOT_FOUND = "not_found"  # no route at the path
METHOD_NOT_ALLOWED = "method_not_allowed"  # a route at the path, not for this HTTP method


def routing_refusal(http_method: str, status: int, allow: str | None) -> tuple[str, str]:
    """(kind, message) of a request routing turned down: a path nothing serves, or a method the path does not take."""
    if status == HTTPStatus.NOT_FOUND:
        return NOT_FOUND, f"nothing is served at this path (GET {OPENAPI_PATH} lists the routes)"
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        return METHOD_NOT_ALLOWED, f"{excerpt(http_method)} is not allowed on this path" + (f"; use {allow}" if allow else "")
    return f"http_{status}", f"HTTP {status}"


class DoorLifecycle(Protocol):
    """What the HTTP door reads of the process's life, and hands its server as the ASGI lifespan.

    The serving side owns it (serving.lifecycle): the door starts nothing and keeps no state of its own.
    """

    @property
    def draining(self) -> bool:
        """SIGTERM came: /ready answers 503 while requests are still answered."""

    @property
    def loading(self) -> bool:
        """The backend's background start has not ended."""

    @property
    def start_failure(self) -> BaseException | None:
        """Why the backend's start failed, once it has."""

    async def ready(self) -> bool:
        """Whether the backend can classify now."""

    def health(self) -> dict[str, Any]:
        """What the services add to /health (the Redis link, the embedder route, a worker's identity)."""

    def on_drain(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` when draining starts (at once if it has)."""

    def running(self) -> AbstractAsyncContextManager[None]:
        """Start on entry, stop on exit: the app's lifespan."""


@dataclass(frozen=True)
class HttpDoorParts:
    """What the HTTP door is given: it builds routes over these, and starts or closes none of them."""

    dispatcher: McpDispatcher
    backend: ClassificationBackend  # /health reads its health, with the info
    lifecycle: DoorLifecycle
    metrics: GatewayMetrics
    sse_sessions: SseSessions
    max_body_bytes: int
    edge: EdgeGuard | None = None  # auth, Host/Origin allowlists and the rate limit, before every route but /health, /ready, /metrics
    tool_filter: ToolFilter | None = None  # POST /v1/tools/filter, when given
    embeddings: EmbeddingsOptions = EmbeddingsOptions()  # POST /v1/embeddings and GET /v1/models (OpenAI-compatible)
    # POST /classify's limits on texts, classify_text's and classify_batch's (the settings' defaults unless given)
    max_text_length: int = ServingSettings.model_fields["max_text_length"].default
    max_batch_texts: int = ServingSettings.model_fields["max_batch_texts"].default


def create_app(parts: HttpDoorParts) -> FastAPI:
    """The gateway app: the routes over ``parts``. Its lifespan is the lifecycle's, so whoever serves the app
    (uvicorn, the opening app, a test client) runs the start and shutdown the serving side owns."""
    app = FastAPI(
        title="mcp-classifier",
        lifespan=lambda _app: parts.lifecycle.running(),
        docs_url=None,
        redoc_url=None,
        openapi_url=OPENAPI_PATH,
    )
    app.openapi = lambda: _openapi_document(app)  # type: ignore[method-assign]  # FastAPI documents this override
    if parts.edge is not None:
        app.add_middleware(EdgeMiddleware, guard=parts.edge, openai_paths=OPENAI_PATHS)
    # Outside the edge guard: refusals are logged and counted too.
    app.add_middleware(CorrelationMiddleware, observer=parts.metrics.observe_door)
    app.add_middleware(McpPathMiddleware)  # outermost: /mcp/ and /mcp//method reach the routes as /mcp and /mcp/method
    app.exception_handler(StarletteHTTPException)(_routing_error)
    _add_mcp_routes(app, parts)
    if parts.tool_filter is not None:
        _add_tool_filter_route(app, parts.tool_filter, parts.max_body_bytes, parts.metrics)
        add_tool_feedback_route(app, parts.tool_filter, parts.max_body_bytes, parts.metrics)
    add_router_classify_route(
        app, parts.backend, parts.metrics, RouterClassifyLimits(parts.max_body_bytes, parts.max_text_length, parts.max_batch_texts)
    )
    add_openai_routes(app, parts.backend, parts.embeddings, parts.max_body_bytes, parts.metrics)
    add_websocket_route(app, parts.dispatcher, max_message_bytes=parts.max_body_bytes, metrics=parts.metrics)
    add_sse_routes(app, parts.dispatcher, parts.sse_sessions)
    parts.lifecycle.on_drain(parts.sse_sessions.drain)  # SIGTERM ends the open streams: their clients move to a ready replica
    _add_probe_routes(app, parts)
    return app


async def _routing_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Unknown paths and methods answer in the service's own error shape, with an event id, like every other refusal."""
    headers = dict(exc.headers or {})
    return refusal(exc.status_code, *routing_refusal(request.method, exc.status_code, headers.get("Allow")), headers)


def _add_mcp_routes(app: FastAPI, parts: HttpDoorParts) -> None:
    """POST /mcp (JSON-RPC, one message or a batch), its 405s, and POST /mcp/<method> (REST style)."""
    dispatcher, metrics, max_body_bytes = parts.dispatcher, parts.metrics, parts.max_body_bytes

    @app.post("/mcp", openapi_extra=openapi.MCP_JSONRPC)
    async def mcp_jsonrpc(request: Request) -> Response:
        return await metrics.observed("/mcp", _jsonrpc(request))

    async def _jsonrpc(request: Request) -> Response:
        try:
            body = await read_body(request, max_body_bytes)
        except BodyTooLarge:
            metrics.errors.labels(ErrorKind.BODY_TOO_LARGE.value).inc()
            return json_response(dispatcher.answer_error(None, body_too_large(max_body_bytes), None, None), status=413)
        return await _jsonrpc_answer(request, body)

    async def _jsonrpc_answer(request: Request, body: bytes) -> Response:
        headers = request.headers
        status, answer = await answer_post(
            dispatcher, body, headers.getlist("mcp-protocol-version"), headers.getlist("mcp-method"), headers.getlist("mcp-name")
        )
        return Response(status_code=status) if answer is None else json_response(answer, status=status)

    @app.api_route("/mcp", methods=["GET", "DELETE"], include_in_schema=False)  # a clear 405, not an operation
    async def mcp_not_allowed() -> Response:
        # Stateless server: no SSE stream to resume and no session to delete.
        return refusal(405, METHOD_NOT_ALLOWED, "only POST is supported on /mcp", {"Allow": "POST"})

    @app.post("/mcp/{method:path}", openapi_extra=openapi.MCP_REST)
    async def mcp_rest(method: str, request: Request) -> Response:
        return await metrics.observed(route_label("/mcp/" + method), _rest_call(method, request))

    async def _rest_call(method: str, request: Request) -> Response:
        if method not in REST_METHODS:
            correlation.note(era="rest", method=clip(method))
            unknown = JsonRpcError(METHOD_NOT_FOUND, f"unknown method {excerpt(method)}; REST style serves {sorted(REST_METHODS)}")
            return rest_error(unknown, clip(method), metrics)
        correlation.note(era="rest", method=method)
        try:
            result = await dispatcher.call(method, rest_params(await read_json(request, max_body_bytes)))
        except JsonRpcError as exc:
            return rest_error(exc, method, metrics)
        return json_response(result)


def _add_probe_routes(app: FastAPI, parts: HttpDoorParts) -> None:
    """/health, /ready and /metrics: what probes, operators and scrapers read."""
    lifecycle, metrics = parts.lifecycle, parts.metrics

    @app.get("/health", openapi_extra=openapi.HEALTH)
    async def health() -> Response:
        return json_response(await _health_answer(parts))

    @app.get("/ready", openapi_extra=openapi.READY)
    async def ready() -> Response:
        if lifecycle.draining:  # set on SIGTERM (transports.server): stop routing here, requests still answered
            return json_response({"ready": False, "draining": True}, status=503)
        ok = await lifecycle.ready()
        return json_response({"ready": ok}, status=200 if ok else 503)

    @app.get("/metrics", openapi_extra=openapi.METRICS)
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)


async def _health_answer(parts: HttpDoorParts) -> dict[str, Any]:
    """/health's body: starting or failed while the backend's start has not succeeded, else the backend's info."""
    lifecycle = parts.lifecycle
    if lifecycle.loading or lifecycle.start_failure is not None:
        error = lifecycle.start_failure
        return {"status": "starting" if error is None else "failed", **({"error": str(error)} if error else {}), **lifecycle.health()}
    try:
        health = await parts.backend.health(need_info=True)
        info = health.require_info()
    except Exception as exc:  # noqa: BLE001 - health must answer whatever the backend does
        return {"status": "degraded", "error": str(exc)}
    return {
        "status": "ok",
        "categories": info.categories.names,
        "model": info.model_id,
        "index_size": info.index_size,
        "temperature": info.temperature,
        "leave_one_out_accuracy": info.loo_accuracy,
        "scoring": info.scoring,
        "category_set_version": info.category_set_version,
        "policy_version": info.policy_version,
        "device": info.device,
        "dtype": info.dtype,
        "pooling": info.pooling,
        "categories_reload_error": info.reload_error,
        "scope": public_scope(info.scope, info.categories.names, info.categories.detect_out_of_scope),
        "fallback": info.categories.fallback,
        "languages": info.languages_public,
        "classifiers": {name: _classifier_health(each) for name, each in health.every_info().items()},
        **parts.sse_sessions.health(),
        **lifecycle.health(),
    }


def _classifier_health(info: ClassifierInfo) -> dict[str, Any]:
    """/health's entry for one classifier: its versions, categories and any refused reload (the default's are also on top)."""
    return {
        "categories": info.categories.names,
        "category_set_version": info.category_set_version,
        "policy_version": info.policy_version,
        "scoring": info.scoring,
        "categories_reload_error": info.reload_error,
        "scope": public_scope(info.scope, info.categories.names, info.categories.detect_out_of_scope),
    }


def _add_tool_filter_route(app: FastAPI, tool_filter: ToolFilter, max_body_bytes: int, metrics: GatewayMetrics) -> None:
    """POST /v1/tools/filter for proxies: the caller's tools back, filtered and ordered, in the shape they came in."""

    @app.post(TOOL_FILTER_PATH, openapi_extra=openapi.TOOL_FILTER)
    async def filter_tools(request: Request) -> Response:
        return await metrics.observed(TOOL_FILTER_PATH, _filter(request))

    async def _filter(request: Request) -> Response:
        correlation.note(era="rest", method="tools/filter")
        try:
            body = await read_json(request, max_body_bytes)
            try:
                asked = filter_arguments(body, tool_filter.default_threshold)
                selection = await tool_filter.select(asked.query, asked.tools, asked.top_k, asked.threshold)
            except ToolError as exc:
                raise JsonRpcError(INVALID_PARAMS, str(exc)) from None
        except JsonRpcError as exc:
            return rest_error(exc, "tools/filter", metrics)
        kept = [asked.tools[i] for i in selection.indices]
        # ToolFilterAnswer's shape, written out: dumping the caller's tools through pydantic walks every nested value
        payload: dict[str, Any] = {"tools": kept, "filtered": selection.filtered, "total": selection.total, "kept": len(kept)}
        headers = {"X-Tool-Filter": f"{selection.total}->{len(kept)}", "X-Tool-Filter-Status": "filtered"}
        if selection.filtered:
            payload.update(scores=selection.scores, confidences=selection.confidences, needs=selection.needs)
        else:
            payload["reason"] = selection.reason
            headers["X-Tool-Filter-Status"] = "unfiltered"
        return json_response(payload, headers=headers)
