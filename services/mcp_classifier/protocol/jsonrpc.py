"""JSON-RPC 2.0 envelope: parsing, validation and response shapes (docs/protocol.md, "JSON-RPC on POST /mcp")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_UNAVAILABLE = -32000  # implementation-defined range: the classification backend is down or overloaded
# MCP 2026-07-28 (stateless revision)
HEADER_MISMATCH = -32020  # a routing header (MCP-Protocol-Version, Mcp-Method, Mcp-Name) is absent or disagrees with the body
MISSING_CLIENT_CAPABILITY = -32021  # the request needs a client capability its _meta does not declare
UNSUPPORTED_PROTOCOL_VERSION = -32022  # data: {"supported": [...], "requested": "..."}

RequestId = str | int


class JsonRpcError(Exception):
    """An error answered as a JSON-RPC error object; ``message`` is safe to show callers."""

    def __init__(self, code: int, message: str, data: Any = None, request_id: RequestId | None = None, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id  # the id the error answers; None when unknown or invalid
        self.kind = kind  # an errors.ErrorKind value when the code alone does not say it (read by errors.kind_of)
        self.event_id: str | None = None  # set once, when the error is answered (errors.record_error)
        self.trace_id: str | None = None  # the request's trace id, when the door reports one

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        data = self.data
        if self.event_id is not None or self.trace_id is not None:
            data = dict(data) if isinstance(data, dict) else ({} if data is None else {"detail": data})
            if self.event_id is not None:
                data["eventId"] = self.event_id
            if self.trace_id is not None:
                data["traceId"] = self.trace_id
        if data is not None:
            error["data"] = data
        return error


@dataclass(frozen=True)
class Request:
    method: str
    params: dict[str, Any]
    id: RequestId | None
    is_notification: bool


def error_response(request_id: RequestId | None, error: JsonRpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_request(message: Any) -> Request | None:
    """Validate one message. Returns None for client responses (we never send requests, so they are ignored).

    Raises JsonRpcError carrying the id to answer with (``data`` left None) when the envelope is bad.
    """
    if not isinstance(message, dict):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: each message must be a JSON object")
    if "method" not in message and ("result" in message or "error" in message):
        return None
    if message.get("jsonrpc") != "2.0":
        raise _with_id(message, JsonRpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be exactly "2.0"'))
    if "id" in message:
        if message["id"] is None:
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "id" must not be null')
        if not _valid_id(message["id"]):
            raise JsonRpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise _with_id(message, JsonRpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string'))
    params = message.get("params", {})
    if params is None:
        params = {}
    is_notification = "id" not in message
    if not isinstance(params, dict):
        if is_notification:  # a notification is never answered, not even with an error
            return Request(method=method, params={}, id=None, is_notification=True)
        raise _with_id(message, JsonRpcError(INVALID_PARAMS, 'Invalid params: "params" must be an object'))
    return Request(method=method, params=params, id=message.get("id"), is_notification=is_notification)


def _with_id(message: dict[str, Any], error: JsonRpcError) -> JsonRpcError:
    """Attach the request id (when valid) so the error answers the right request."""
    request_id = message.get("id")
    error.request_id = request_id if _valid_id(request_id) else None
    return error
