"""FastAPI app factory: POST /mcp (JSON-RPC), POST /mcp/<method> (REST style), the tool filter, health, readiness, metrics, /openapi.json."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..backend.base import ClassificationBackend
from ..backend.starting import StartingBackend
from ..classify.scope_stats import public_scope
from ..edge import EdgeGuard, EdgeMiddleware
from ..protocol import correlation
from ..protocol.dispatcher import McpDispatcher
from ..protocol.errors import ErrorKind, rule_of, settle
from ..protocol.excerpts import clip, excerpt
from ..protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JsonRpcError
from ..protocol.tools import ToolError
from ..settings import Settings
from ..telemetry import GatewayMetrics
from ..toolfilter.tool_filter import ToolFilter, filter_arguments
from . import openapi
from .bodies import BodyTooLarge, body_too_large, json_response, read_body, read_json, refusal
from .correlated import TOOL_FILTER_PATH, CorrelationMiddleware
from .jsonrpc_post import answer_post
from .mcp_paths import McpPathMiddleware
from .route_labels import OPENAPI_PATH, REST_METHODS, route_label
from .sse import SseSessions, add_sse_routes, local_sessions
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


def create_app(
    dispatcher: McpDispatcher,
    backend: ClassificationBackend,
    *,
    max_body_bytes: int,
    metrics: GatewayMetrics | None = None,
    edge: EdgeGuard | None = None,
    services: Sequence[Any] = (),
    freeze_gc: bool = False,
    tool_filter: ToolFilter | None = None,
    sse_sessions: SseSessions | None = None,
    late_services: Sequence[Any] = (),
    background_services: Sequence[Any] = (),
    startup: StartingBackend | None = None,
    on_ready: Callable[[float | None], None] | None = None,
) -> FastAPI:
    """The gateway app. The lifespan starts and closes the backend, so uvicorn owns the whole lifetime.

    ``edge`` puts auth, Host/Origin allowlists and the rate limit in front of every route but
    /health, /ready and /metrics. ``services`` are objects with async ``start()``/``close()``
    (e.g. the Redis link) started before the backend and closed after it; an optional
    ``health()`` dict of theirs is merged into /health. ``late_services`` start after the backend
    and close before it. ``background_services`` start as tasks while the doors open (the Redis link: loading
    redis-py and connecting must not hold the handshake); ``on_ready`` waits for them. With ``startup`` (the backend's background start, under any wrapper) every door
    answers at once and the late services, ``on_ready`` and the GC freeze follow the start. ``freeze_gc`` (for a process that serves
    only this app) moves everything alive after start-up out of the cyclic GC's reach.
    """
    metrics = metrics or GatewayMetrics()
    dispatcher.method_observer = metrics.observe_method
    sse = sse_sessions or local_sessions(Settings().serving, metrics, max_body_bytes)

    async def open_late_doors(late_started: list[Any]) -> None:
        # What start-up loaded (torch, the model, Ray's client) lives as long as the process:
        # freeze it out of the cyclic GC, whose full collections otherwise scan it all and
        # stalled the event loop ~190 ms at a time, about once a second under load.
        if freeze_gc:
            gc.collect()
            gc.freeze()
        for service in late_services:  # doors that should open only once the backend can answer (gRPC)
            await service.start()
            late_started.append(service)

    async def when_started(late_started: list[Any], background: list[asyncio.Task[None]]) -> None:
        """The backend's background start: then the late doors, the ready line; a failed start stops the server."""
        assert startup is not None
        try:
            await startup.wait_started()
            await asyncio.gather(*background)
            await open_late_doors(late_started)
        except Exception as exc:  # noqa: BLE001 - the process cannot classify: say why and stop
            app.state.start_error = exc
            app.state.stop_server()
            return
        if on_ready is not None:
            on_ready(startup.start_seconds)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Background services close last, whether or not their start finished (the Redis link outlives its users).
        started: list[Any] = list(background_services)
        background = [asyncio.create_task(service.start(), name=f"start-{type(service).__name__}") for service in background_services]
        try:
            for service in services:
                await service.start()
                started.append(service)
            await backend.start()  # with a StartingBackend (startup) this returns at once: the doors open now
            late_started: list[Any] = []
            bring_up = asyncio.create_task(when_started(late_started, background)) if startup is not None else None
            try:
                if bring_up is None:
                    await asyncio.gather(*background)
                    await open_late_doors(late_started)
                yield
            finally:
                if bring_up is not None:
                    bring_up.cancel()
                    await asyncio.gather(bring_up, return_exceptions=True)
                for service in reversed(late_started):
                    await service.close()
                await backend.close()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for service in reversed(started):
                await service.close()

    app = FastAPI(title="mcp-classifier", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=OPENAPI_PATH)
    app.state.draining = False
    app.state.start_error = None
    app.state.stop_server = lambda: None  # the CLI's server sets this: a failed background start stops it

    def start_draining() -> None:
        """SIGTERM (transports.server): /ready answers 503 and open SSE streams end, so clients move to a ready replica."""
        app.state.draining = True
        sse.drain()

    app.state.start_draining = start_draining
    app.openapi = lambda: _openapi_document(app)  # type: ignore[method-assign]  # FastAPI documents this override
    if edge is not None:
        app.add_middleware(EdgeMiddleware, guard=edge)
    app.add_middleware(CorrelationMiddleware, observer=metrics.observe_door)  # outside the edge guard: refusals are logged and counted too
    app.add_middleware(McpPathMiddleware)  # outermost: /mcp/ and /mcp//method reach the routes as /mcp and /mcp/method

    @app.exception_handler(StarletteHTTPException)
    async def routing_error(request: Request, exc: StarletteHTTPException) -> Response:
        """Unknown paths and methods answer in the service's own error shape, with an event id, like every other refusal."""
        headers = dict(exc.headers or {})
        return refusal(exc.status_code, *routing_refusal(request.method, exc.status_code, headers.get("Allow")), headers)

    @app.post("/mcp", openapi_extra=openapi.MCP_JSONRPC)
    async def mcp_jsonrpc(request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await read_body(request, max_body_bytes)
        except BodyTooLarge:
            metrics.errors.labels(ErrorKind.BODY_TOO_LARGE.value).inc()
            response = json_response(dispatcher.answer_error(None, body_too_large(max_body_bytes), None, None), status=413)
        else:
            response = await _jsonrpc_answer(request, body)
        metrics.observe("/mcp", response.status_code, time.perf_counter() - started)
        return response

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
        started = time.perf_counter()
        response = await _rest_call(method, request)
        metrics.observe(route_label("/mcp/" + method), response.status_code, time.perf_counter() - started)
        return response

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

    if tool_filter is not None:
        _add_tool_filter_route(app, tool_filter, max_body_bytes, metrics)
    add_websocket_route(app, dispatcher, max_message_bytes=max_body_bytes, metrics=metrics)
    add_sse_routes(app, dispatcher, sse)

    @app.get("/health", openapi_extra=openapi.HEALTH)
    async def health() -> Response:
        if startup is not None and (startup.loading or startup.start_error is not None):
            error = startup.start_error
            return json_response(
                {"status": "starting" if error is None else "failed", **({"error": str(error)} if error else {}), **extra_health()}
            )
        try:
            info = await backend.info()
        except Exception as exc:  # noqa: BLE001 - health must answer whatever the backend does
            return json_response({"status": "degraded", "error": str(exc)})
        return json_response(
            {
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
                **sse.health(),
                **extra_health(),
            }
        )

    def extra_health() -> dict[str, Any]:
        extra: dict[str, Any] = {}
        for service in (*background_services, *services):
            if hasattr(service, "health"):
                extra.update(service.health())
        return extra

    @app.get("/ready", openapi_extra=openapi.READY)
    async def ready() -> Response:
        if app.state.draining:  # set on SIGTERM (transports.server): stop routing here, requests still answered
            return json_response({"ready": False, "draining": True}, status=503)
        ok = await backend.ready()
        return json_response({"ready": ok}, status=200 if ok else 503)

    @app.get("/metrics", openapi_extra=openapi.METRICS)
    async def prometheus_metrics() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return app


def rest_error(exc: JsonRpcError, method: str, metrics: GatewayMetrics) -> Response:
    """The REST shape of an error: {"error", "data"} with the table's HTTP status; data carries the event and trace ids."""
    kind = settle(exc, method)
    metrics.errors.labels(kind.value).inc()
    payload: dict[str, Any] = {"error": exc.message}
    error_data = exc.to_error().get("data")
    if error_data is not None:
        payload["data"] = error_data
    return json_response(payload, status=rule_of(exc).rest_status)


def _add_tool_filter_route(app: FastAPI, tool_filter: ToolFilter, max_body_bytes: int, metrics: GatewayMetrics) -> None:
    """POST /v1/tools/filter for proxies: the caller's tools back, filtered and ordered, in the shape they came in."""

    @app.post(TOOL_FILTER_PATH, openapi_extra=openapi.TOOL_FILTER)
    async def filter_tools(request: Request) -> Response:
        started = time.perf_counter()
        response = await _filter(request)
        metrics.observe(TOOL_FILTER_PATH, response.status_code, time.perf_counter() - started)
        return response

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
            payload["scores"] = selection.scores
        else:
            payload["reason"] = selection.reason
            headers["X-Tool-Filter-Status"] = "unfiltered"
        return json_response(payload, headers=headers)
