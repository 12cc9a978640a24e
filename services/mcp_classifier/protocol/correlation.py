"""Correlation: one trace id per request, returned to the caller and written to one log line.

A door opens a ``RequestRecord`` (``begin``) for each request it reads; the dispatcher fills in
era, method, tool, outcome and event id as it goes; the door writes the trace id into its answer
(``_meta`` and a header) and closes the record (``finish``), which logs one structured line.
The trace id is the current OpenTelemetry trace's when tracing is on, else the caller's W3C
``traceparent`` (header or ``_meta``), else a fresh random one: every answer has one either way.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

access_log = logging.getLogger("mcp_classifier.access")

META_TRACE_ID = "dev.mcp-classifier/traceId"  # result._meta key of the trace id (a prefix of our own: the spec's is reserved)
TRACE_ID_HEADER = "x-trace-id"
TRACEPARENT = "traceparent"  # W3C Trace Context; 2026-07-28 reserves it in params._meta too
_propagator = TraceContextTextMapPropagator()

# (door, outcome, seconds) of a finished request: the door's metrics, handed in by the door, so this module keeps none
DoorObserver = Callable[[str, str, float], None]


@dataclass
class RequestRecord:
    door: str  # http, rest, sse, ws, stdio, grpc, tool_filter
    trace_id: str
    session_id: str | None = None
    era: str | None = None
    method: str | None = None
    tool: str | None = None
    outcome: str = "ok"
    event_id: str | None = None
    started: float = field(default_factory=time.perf_counter)
    observer: DoorObserver | None = field(default=None, repr=False)

    def log_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "trace_id": self.trace_id,
            "door": self.door,
            "era": self.era,
            "method": self.method,
            "outcome": self.outcome,
            "latency_ms": round((time.perf_counter() - self.started) * 1000, 3),
        }
        for name in ("session_id", "tool", "event_id"):
            if getattr(self, name) is not None:
                fields[name] = getattr(self, name)
        return fields


_current: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar("mcp_classifier_request", default=None)


def current() -> RequestRecord | None:
    return _current.get()


def begin(
    door: str, *, traceparent: str | None = None, session_id: str | None = None, observer: DoorObserver | None = None
) -> RequestRecord:
    """Open the record of one request in this context (the door's task); ``observer`` gets its outcome when it finishes."""
    record = RequestRecord(door=door, trace_id=trace_id_now(traceparent), session_id=session_id, observer=observer)
    _current.set(record)
    return record


def finish(record: RequestRecord) -> None:
    """The request's one log line (the JSON formatter turns the extra fields into keys), and its door's metrics."""
    fields = record.log_fields()
    if record.observer is not None:
        record.observer(record.door, record.outcome, time.perf_counter() - record.started)
    access_log.info(
        "%s %s %s %s %.1f ms",
        record.door,
        record.method or "-",
        record.outcome,
        record.trace_id,
        fields["latency_ms"],
        extra=fields,
    )
    _current.set(None)


def trace_id_now(traceparent: str | None = None) -> str:
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        return format(span_context.trace_id, "032x")
    caller = _caller({TRACEPARENT: traceparent}) if traceparent else None
    return caller[1] if caller is not None else secrets.token_hex(16)


def adopt_meta_trace(meta: Any) -> otel_context.Context | None:
    """A ``_meta.traceparent`` continues the caller's trace: its context (for the span), and the record's trace id becomes it."""
    if not isinstance(meta, dict) or not isinstance(meta.get(TRACEPARENT), str):
        return None
    caller = _caller({key: meta[key] for key in (TRACEPARENT, "tracestate") if isinstance(meta.get(key), str)})
    if caller is None:
        return None
    note(trace_id=caller[1])
    return caller[0]


def _caller(carrier: dict[str, str]) -> tuple[otel_context.Context, str] | None:
    """The W3C trace context in ``carrier`` and its trace id, or None when it is malformed."""
    extracted = _propagator.extract(carrier)
    span_context = trace.get_current_span(extracted).get_span_context()
    return (extracted, format(span_context.trace_id, "032x")) if span_context.is_valid else None


def note(**fields: Any) -> None:
    """Fill fields of the current request's record, if a door opened one."""
    record = _current.get()
    if record is not None:
        for name, value in fields.items():
            setattr(record, name, value)
