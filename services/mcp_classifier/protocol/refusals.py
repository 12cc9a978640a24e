"""Refusals outside the error table: an unknown path, a wrong HTTP method, the edge's 401/403/429, a legacy SSE
session that is missing or gone, a WebSocket handshake turned down.

They have no JSON-RPC code, but a caller reporting one needs the same handle as for any protocol error:
each gets an event id, is logged under it (and marks the request's log line), and answers in the REST
error shape ``{"error": ..., "data": {"eventId": ..., "traceId": ...}}``. The message must already be
short: callers cut any value of the caller's with ``excerpts``.
"""

from __future__ import annotations

import logging
from typing import Any

from . import correlation
from .errors import log, new_event_id

SERVER_SIDE = 500  # statuses from here up are the service's trouble (overload, shutdown): logged as warnings


def record_refusal(kind: str, answered: str, message: str, *, level: int = logging.INFO) -> str:
    """Log the refusal under a new event id (returned) and mark the request's line with both.

    ``answered`` says how the caller was told (``HTTP 404``, ``gRPC UNAUTHENTICATED``)."""
    event_id = new_event_id()
    log.log(level, "%s (%s): %s", kind, answered, message, extra={"event_id": event_id, "error_kind": kind, "answered": answered})
    correlation.note(outcome=kind, event_id=event_id)
    return event_id


def refusal_body(kind: str, status: int, message: str) -> dict[str, Any]:
    """Log an HTTP refusal under a new event id and return the body that carries it (and the request's trace id)."""
    event_id = record_refusal(kind, f"HTTP {status}", message, level=logging.WARNING if status >= SERVER_SIDE else logging.INFO)
    data: dict[str, Any] = {"eventId": event_id}
    record = correlation.current()
    if record is not None:
        data["traceId"] = record.trace_id
    return {"error": message, "data": data}
