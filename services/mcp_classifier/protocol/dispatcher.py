"""MCP method dispatch shared by every transport (HTTP JSON-RPC in both eras, REST style, stdio)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from opentelemetry import trace

from .. import SERVER_NAME, __version__
from ..backend.base import BackendError
from . import correlation
from .errors import ErrorKind, record_tool_failure, settle
from .excerpts import excerpt
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_UNAVAILABLE,
    JsonRpcError,
    Request,
    error_response,
    parse_request,
    result_response,
)
from .stateless import (
    HANDSHAKE_VERSIONS,
    REMOVED_METHODS,
    STATELESS_VERSION,
    RoutingHeaders,
    all_supported_versions,
    check_request,
    finish_result,
    method_not_found,
)
from .tools import ToolRegistry, UnknownTool, error_message

log = logging.getLogger(__name__)
tracer = trace.get_tracer("mcp_classifier.protocol")

FALLBACK_PROTOCOL_VERSION = "2025-06-18"
# MCP logging levels (RFC 5424 names) -> Python logging levels.
MCP_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
INSTRUCTIONS = (
    "Call classify_text with the user's query before routing it: it returns the category index, "
    "confidence, the model to route to and whether to use reasoning. list_categories names the classes."
)

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
# (era, method, outcome): outcome is "ok" or the error kind (errors.ErrorKind); method is "<unknown>" outside the known set
MethodObserver = Callable[[str, str, str], None]
HANDSHAKE_ERA = "handshake"


def method_failure(exc: Exception, method: str) -> JsonRpcError:
    """What a failed method answers, for every door that runs one: a protocol error as it is, a backend failure as
    SERVER_UNAVAILABLE with its kind, anything else as INTERNAL_ERROR naming only the exception's type (logged whole)."""
    if isinstance(exc, JsonRpcError):
        return exc
    if isinstance(exc, BackendError):
        return JsonRpcError(SERVER_UNAVAILABLE, f"classification backend {exc.kind}: {exc}", {"kind": exc.kind})
    log.exception("method %s failed", method, exc_info=exc)
    return JsonRpcError(INTERNAL_ERROR, f"Internal error in {method}: {type(exc).__name__}")


class McpDispatcher:
    """Stateless: no session, any method works without a prior initialize (any replica gets any request)."""

    def __init__(self, tools: ToolRegistry, *, list_ttl_ms: int) -> None:
        self.tools = tools
        self.method_observer: MethodObserver | None = None  # set by a transport that counts methods (metrics)
        self._list_ttl_ms = list_ttl_ms
        self._methods: dict[str, Handler] = {
            "initialize": self._initialize,
            "ping": self._empty,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "logging/setLevel": self._set_level,
            "resources/list": self._resources_list,
            "prompts/list": self._prompts_list,
        }
        # MCP 2026-07-28: discovery instead of the handshake, and the empty lists its clients probe.
        self._stateless_methods: dict[str, Handler] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resource_templates_list,
            "prompts/list": self._prompts_list,
        }

    # ---- entry points ----------------------------------------------------------------------
    async def handle_bytes(self, body: bytes) -> Any | None:
        """A raw JSON-RPC payload -> the response object, list, or None when nothing is owed (HTTP 202)."""
        try:
            payload = _decode(body)
        except JsonRpcError as exc:
            return self.answer_error(None, exc, None, None)
        return await self.handle_payload(payload)

    async def handle_payload(self, payload: Any) -> Any | None:
        if isinstance(payload, list):
            if not payload:
                return self.answer_error(None, JsonRpcError(INVALID_REQUEST, "Invalid Request: empty batch"), None, None)
            responses = [r for r in [await self.handle_message(m) for m in payload] if r is not None]
            return responses or None
        return await self.handle_message(payload)

    async def handle_message(self, message: Any) -> dict[str, Any] | None:
        try:
            request = parse_request(message)
        except JsonRpcError as exc:
            return self.answer_error(exc.request_id, exc, None, None)
        if request is None:
            return None
        if request.is_notification:
            await self._notification(request)
            return None
        assert request.id is not None  # a request that is not a notification carries a valid id
        correlation.note(era=HANDSHAKE_ERA, method=request.method)
        try:
            result = await self.call(request.method, request.params)
        except JsonRpcError as exc:
            return self.answer_error(request.id, exc, HANDSHAKE_ERA, request.method)
        return self._answer_result(request.id, result, HANDSHAKE_ERA, request.method)

    async def handle_stateless_bytes(self, body: bytes, headers: RoutingHeaders) -> dict[str, Any] | None:
        """One MCP 2026-07-28 message (never a batch) -> its response, or None for a notification."""
        try:
            message = _decode(body)
        except JsonRpcError as exc:
            return self.answer_error(None, exc, None, None)
        if not isinstance(message, dict):
            error = JsonRpcError(INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC request object")
            return self.answer_error(None, error, None, None)
        try:
            request = parse_request(message)
        except JsonRpcError as exc:
            return self.answer_error(exc.request_id, exc, STATELESS_VERSION, None)
        if request is None or request.is_notification:
            return None
        assert request.id is not None  # a request that is not a notification carries a valid id
        correlation.note(era=STATELESS_VERSION, method=request.method)
        try:
            check_request(request, headers)
            handler = self._stateless_methods.get(request.method)
            if handler is None:
                raise method_not_found(request.method)
            result = await self._traced(request.method, handler, request.params)
        except JsonRpcError as exc:
            return self.answer_error(request.id, exc, STATELESS_VERSION, request.method)
        result = finish_result(request.method, result, self._server_info(), self._list_ttl_ms)
        return self._answer_result(request.id, result, STATELESS_VERSION, request.method)

    def answer_error(self, request_id: Any, exc: JsonRpcError, era: str | None, method: str | None) -> dict[str, Any]:
        """An error answer carrying its event id and the trace id (error.data), counted by kind."""
        kind = settle(exc, method)
        if era is not None and method is not None:
            self._observe(era, method, kind.value)
        return error_response(request_id, exc)

    def _answer_result(self, request_id: Any, result: dict[str, Any], era: str, method: str) -> dict[str, Any]:
        record = correlation.current()
        if record is not None and result:  # empty results (ping, logging/setLevel) stay {}: clients check for exactly that
            result = with_meta(result, correlation.META_TRACE_ID, record.trace_id)
        failed = method == "tools/call" and result.get("isError") is True
        self._observe(era, method, ErrorKind.TOOL_EXECUTION_FAILED.value if failed else "ok")
        return result_response(request_id, result)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run one method; raises JsonRpcError. The REST transport calls this directly."""
        handler = self._methods.get(method)
        if handler is None:
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {excerpt(method)}")
        return await self._traced(method, handler, params)

    async def _traced(self, method: str, handler: Handler, params: dict[str, Any]) -> dict[str, Any]:
        # A traceparent in _meta (reserved by 2026-07-28 for this) continues the caller's trace, as the header does.
        caller = correlation.adopt_meta_trace(params.get("_meta"))
        with tracer.start_as_current_span(f"mcp {method}", context=caller, attributes={"mcp.method": method}) as span:
            if method == "tools/call" and isinstance(params.get("name"), str):
                span.set_attribute("mcp.tool", params["name"])
                correlation.note(tool=params["name"])
            return await self._run(method, handler, params)

    async def _run(self, method: str, handler: Handler, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await handler(params)
        except Exception as exc:
            failure = method_failure(exc, method)
            if failure is exc:
                raise
            raise failure from exc

    # ---- methods ---------------------------------------------------------------------------
    async def _notification(self, request: Request) -> None:
        if request.method.startswith("notifications/"):
            return
        log.debug("ignoring notification for method %s", request.method)

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else FALLBACK_PROTOCOL_VERSION
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "logging": {}},
            "serverInfo": {"name": SERVER_NAME, "version": __version__},
            "instructions": INSTRUCTIONS,
        }

    def _observe(self, era: str, method: str, outcome: str) -> None:
        if self.method_observer is not None:
            known = method in self._methods or method in self._stateless_methods or method in REMOVED_METHODS
            self.method_observer(era, method if known else "<unknown>", outcome)

    @staticmethod
    def _server_info() -> dict[str, str]:
        return {"name": SERVER_NAME, "version": __version__}

    async def _discover(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "supportedVersions": all_supported_versions(),
            # The lists a 2026-07-28 client probes exist (empty for resources and prompts), so they are declared;
            # nothing changes at run time, so no listChanged or subscriptions.
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
            "instructions": INSTRUCTIONS,
        }

    async def _resource_templates_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"resourceTemplates": []}

    async def _empty(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _tools_list(self, params: dict[str, Any]) -> dict[str, Any]:
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "cursor" must be a string')
        return {"tools": self.tools.definitions()}  # one page: nextCursor omitted

    async def _tools_call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "name" (the tool name) must be a string')
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise JsonRpcError(INVALID_PARAMS, 'Invalid params: "arguments" must be an object')
        try:
            result = await self.tools.call(name, arguments)
        except UnknownTool:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {excerpt(name)}; available: {', '.join(self.tools.names)}") from None
        if result.get("isError") is True:  # every door (JSON-RPC, REST, gRPC) gets the failure's event id from here
            result = with_meta(result, META_EVENT_ID, record_tool_failure(name, error_message(result)))
        return result

    async def _set_level(self, params: dict[str, Any]) -> dict[str, Any]:
        level = params.get("level")
        if level not in MCP_LOG_LEVELS:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(MCP_LOG_LEVELS)}")
        logging.getLogger("mcp_classifier").setLevel(MCP_LOG_LEVELS[level])
        return {}

    async def _resources_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"resources": []}

    async def _prompts_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"prompts": []}


META_EVENT_ID = "dev.mcp-classifier/eventId"  # result._meta key of a failed tool call's event id


def with_meta(result: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """A copy of ``result`` with ``_meta[key]`` set (results may be shared, e.g. cached lists)."""
    return {**result, "_meta": {**(result.get("_meta") or {}), key: value}}


def _decode(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise JsonRpcError(PARSE_ERROR, f"Parse error: {exc}") from None
