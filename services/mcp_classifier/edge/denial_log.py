"""Keeps a deliberate WebSocket refusal from reading as a server error in uvicorn's log.

uvicorn's default WebSocket protocol (websockets-sansio) sends a denial response correctly, then
logs "ASGI callable returned without completing handshake." at ERROR when the app returns, since
it never marks a denied handshake complete (the wsproto protocol does; the fix is proposed upstream
as Kludex/uvicorn#3138). One ERROR per refused key would page whoever alerts on errors. This filter
drops that one line, and only for a handshake this app denied: the denial sets a context variable
in the connection's task, where uvicorn writes the line after the app returns.
"""

from __future__ import annotations

import contextvars
import logging

UVICORN_LOGGER = "uvicorn.error"
INCOMPLETE_HANDSHAKE = "ASGI callable returned without completing handshake."

_denied: contextvars.ContextVar[bool] = contextvars.ContextVar("mcp_classifier_handshake_denied", default=False)
_installed = False


class DeniedHandshakeFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_denied.get() and record.getMessage() == INCOMPLETE_HANDSHAKE)


def mark_denied() -> None:
    """This connection's handshake was answered with a denial on purpose (call from the connection's task)."""
    global _installed
    _denied.set(True)
    if not _installed:  # once per process, at the first denial: nothing to filter before one
        logging.getLogger(UVICORN_LOGGER).addFilter(DeniedHandshakeFilter())
        _installed = True
