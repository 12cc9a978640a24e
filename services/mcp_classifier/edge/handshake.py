"""Turning down a WebSocket handshake with an HTTP answer a client can read.

Closing a WebSocket before accepting it makes the server answer a bare 403: the client learns
neither the status (401, 429) nor why, nor the event id of the refusal. Where the server offers the
ASGI denial-response extension (uvicorn does) the handshake gets the full HTTP refusal instead:
status, headers and the JSON error body (and uvicorn's spurious error line for it is dropped: denial_log).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..util.asgi import Send
from .denial_log import mark_denied

DENIAL_RESPONSE = "websocket.http.response"  # the ASGI extension that answers a handshake with any HTTP response
MAX_CLOSE_REASON_BYTES = 123  # the most a close frame's reason may hold (RFC 6455 section 5.5: 125 minus the code)


async def refuse_handshake(
    scope: Mapping[str, Any], send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes, *, close_code: int, reason: str
) -> None:
    """Answer the handshake with ``status``, ``headers`` and ``body``; without the extension, close before accepting
    (the server then answers 403) with ``close_code`` and ``reason`` for the servers that pass them on."""
    if DENIAL_RESPONSE in scope.get("extensions", {}):
        mark_denied()
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    short = reason.encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")
    await send({"type": "websocket.close", "code": close_code, "reason": short})
