"""The one error table: every failure the protocol core answers, and how each door says it.

Methods raise ``JsonRpcError`` (a value with a JSON-RPC code); its kind is read from the code.
Each door looks the kind up here for its HTTP status (REST style, the 2026-07-28 era), gRPC
status and metric label, so one backend failure is translated once. Every error answered gets
an event id, returned in ``error.data.eventId`` and written to the log line of that failure,
so a caller's report leads to the log.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum

from . import correlation
from .jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    SERVER_UNAVAILABLE,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
)

log = logging.getLogger("mcp_classifier.errors")


class ErrorKind(StrEnum):
    PARSE_ERROR = "parse_error"
    INVALID_REQUEST = "invalid_request"
    METHOD_NOT_FOUND = "method_not_found"
    INVALID_PARAMS = "invalid_params"
    TOOL_EXECUTION_FAILED = "tool_execution_failed"  # answered as a tools/call result with isError: true
    BACKEND_UNAVAILABLE = "backend_unavailable"
    BACKEND_TIMEOUT = "backend_timeout"
    INTERNAL_ERROR = "internal_error"
    HEADER_MISMATCH = "header_mismatch"
    MISSING_CLIENT_CAPABILITY = "missing_client_capability"
    UNSUPPORTED_PROTOCOL_VERSION = "unsupported_protocol_version"
    BODY_TOO_LARGE = "body_too_large"


@dataclass(frozen=True)
class ErrorRule:
    """How one kind is said: JSON-RPC code (None: a result, not an error), HTTP status on the REST style and
    the tool filter, HTTP status in the 2026-07-28 era on POST /mcp (the handshake era always answers 200),
    and the gRPC status name of the public gRPC API."""

    code: int | None
    rest_status: int
    stateless_status: int
    grpc_status: str


ERROR_TABLE: dict[ErrorKind, ErrorRule] = {
    ErrorKind.PARSE_ERROR: ErrorRule(PARSE_ERROR, 400, 400, "INVALID_ARGUMENT"),
    ErrorKind.INVALID_REQUEST: ErrorRule(INVALID_REQUEST, 400, 400, "INVALID_ARGUMENT"),
    ErrorKind.METHOD_NOT_FOUND: ErrorRule(METHOD_NOT_FOUND, 404, 404, "UNIMPLEMENTED"),
    ErrorKind.INVALID_PARAMS: ErrorRule(INVALID_PARAMS, 400, 400, "INVALID_ARGUMENT"),
    ErrorKind.TOOL_EXECUTION_FAILED: ErrorRule(None, 200, 200, "INVALID_ARGUMENT"),
    ErrorKind.BACKEND_UNAVAILABLE: ErrorRule(SERVER_UNAVAILABLE, 503, 200, "UNAVAILABLE"),
    ErrorKind.BACKEND_TIMEOUT: ErrorRule(SERVER_UNAVAILABLE, 504, 200, "DEADLINE_EXCEEDED"),
    ErrorKind.INTERNAL_ERROR: ErrorRule(INTERNAL_ERROR, 500, 200, "INTERNAL"),
    ErrorKind.HEADER_MISMATCH: ErrorRule(HEADER_MISMATCH, 400, 400, "INVALID_ARGUMENT"),
    ErrorKind.MISSING_CLIENT_CAPABILITY: ErrorRule(MISSING_CLIENT_CAPABILITY, 400, 400, "FAILED_PRECONDITION"),
    ErrorKind.UNSUPPORTED_PROTOCOL_VERSION: ErrorRule(UNSUPPORTED_PROTOCOL_VERSION, 400, 400, "INVALID_ARGUMENT"),
    ErrorKind.BODY_TOO_LARGE: ErrorRule(INVALID_REQUEST, 413, 413, "RESOURCE_EXHAUSTED"),
}

# A code shared by several kinds reads as the first of them; the others are told apart by data or set explicitly.
_KIND_OF_CODE: dict[int, ErrorKind] = {}
for _kind, _rule in ERROR_TABLE.items():
    if _rule.code is not None:
        _KIND_OF_CODE.setdefault(_rule.code, _kind)
# Backend failures name their own kind in data (backend.base.BackendError.kind); a timeout has its own status.
_BACKEND_KINDS = {"timeout": ErrorKind.BACKEND_TIMEOUT}


def kind_of(error: JsonRpcError) -> ErrorKind:
    if error.kind is not None:
        return ErrorKind(error.kind)
    if error.code == SERVER_UNAVAILABLE and isinstance(error.data, dict):
        return _BACKEND_KINDS.get(str(error.data.get("kind")), ErrorKind.BACKEND_UNAVAILABLE)
    return _KIND_OF_CODE.get(error.code, ErrorKind.INTERNAL_ERROR)


def rule_of(error: JsonRpcError) -> ErrorRule:
    return ERROR_TABLE[kind_of(error)]


def new_event_id() -> str:
    return uuid.uuid4().hex


def record_error(error: JsonRpcError, method: str | None) -> JsonRpcError:
    """Give the error its event id (once) and log it under that id; the answer then carries it."""
    if error.event_id is None:
        error.event_id = new_event_id()
        kind = kind_of(error)
        level = (
            logging.WARNING
            if kind in (ErrorKind.BACKEND_UNAVAILABLE, ErrorKind.BACKEND_TIMEOUT, ErrorKind.INTERNAL_ERROR)
            else logging.INFO
        )
        log.log(
            level,
            "%s in %s: %s",
            kind.value,
            method or "<no method>",
            error.message,
            extra={"event_id": error.event_id, "error_kind": kind.value, "code": error.code, "method": method},
        )
    return error


def settle(error: JsonRpcError, method: str | None) -> ErrorKind:
    """What every door does with an error it answers: its event id (logged), the request's trace id, the log line's outcome."""
    record_error(error, method)
    kind = kind_of(error)
    record = correlation.current()
    if record is not None:
        error.trace_id = record.trace_id
        correlation.note(outcome=kind.value, event_id=error.event_id)
    return kind


def record_tool_failure(tool: str, message: str) -> str:
    """A tools/call answered with isError: log it under a new event id (returned) and mark the request's outcome."""
    event_id = new_event_id()
    log.info(
        "%s in %s: %s",
        ErrorKind.TOOL_EXECUTION_FAILED.value,
        tool,
        message[:300],
        extra={"event_id": event_id, "error_kind": ErrorKind.TOOL_EXECUTION_FAILED.value, "method": "tools/call", "tool": tool},
    )
    correlation.note(outcome=ErrorKind.TOOL_EXECUTION_FAILED.value, event_id=event_id)
    return event_id
