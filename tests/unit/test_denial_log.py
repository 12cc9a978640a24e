"""uvicorn's spurious "returned without completing handshake" error is dropped only for a handshake the app denied."""

from __future__ import annotations

import contextvars
import logging

from mcp_classifier.edge.denial_log import INCOMPLETE_HANDSHAKE, UVICORN_LOGGER, DeniedHandshakeFilter, mark_denied


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord(UVICORN_LOGGER, logging.ERROR, __file__, 1, message, None, None)


def test_only_a_denied_handshakes_line_is_dropped() -> None:
    keep = DeniedHandshakeFilter()
    assert keep.filter(record(INCOMPLETE_HANDSHAKE)), "an app that really forgot its handshake still shows"

    def denied_connection() -> tuple[bool, bool]:
        mark_denied()
        return keep.filter(record(INCOMPLETE_HANDSHAKE)), keep.filter(record("Exception in ASGI application"))

    spurious, real = contextvars.copy_context().run(denied_connection)
    assert (spurious, real) == (False, True)
    assert keep.filter(record(INCOMPLETE_HANDSHAKE)), "another connection is not marked"
    assert any(isinstance(f, DeniedHandshakeFilter) for f in logging.getLogger(UVICORN_LOGGER).filters)
