"""MCP over WebSocket at GET /ws (subprotocol ``mcp``): the same JSON-RPC messages, one per text frame.

Clients that send JSON-RPC-like messages without ``"jsonrpc"`` are answered in kind (no
``"jsonrpc"`` in the answer). Each connection is one session: its id is in every log line of its
messages. Auth, Host and Origin are checked by the edge guard before the handshake is accepted,
as for HTTP. Messages on one connection run concurrently, so they batch like HTTP requests.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from ..edge.handshake import refuse_handshake
from ..protocol import correlation
from ..protocol.dispatcher import McpDispatcher
from ..protocol.excerpts import name_list
from ..protocol.refusals import refusal_body
from ..telemetry import GatewayMetrics

log = logging.getLogger(__name__)

WS_PATH = "/ws"
SUBPROTOCOL = "mcp"
CLOSE_PROTOCOL_ERROR = 1002  # the close code of a refused subprotocol, where the server cannot answer the handshake itself
FOREIGN_SUBPROTOCOL = "foreign_subprotocol"  # the refusal kind of a handshake that offers subprotocols, none of them ours
CLOSE_TOO_BIG = 1009


def add_websocket_route(app: FastAPI, dispatcher: McpDispatcher, *, max_message_bytes: int, metrics: GatewayMetrics) -> None:
    @app.websocket(WS_PATH)
    async def mcp_websocket(websocket: WebSocket) -> None:
        offered = websocket.scope.get("subprotocols") or []
        if offered and SUBPROTOCOL not in offered:
            await refuse_foreign_subprotocol(websocket)
            return
        await websocket.accept(subprotocol=SUBPROTOCOL if offered else None)
        with metrics.websocket_connections.track_inprogress():  # accepted until the session ends, however it ends
            await WebSocketSession(websocket, dispatcher, max_message_bytes, metrics.observe_door).run()


async def refuse_foreign_subprotocol(websocket: WebSocket) -> None:
    """Turn the handshake down with HTTP 403, before any session opens.

    RFC 6455 lets a server refuse a handshake whose subprotocols it cannot agree to, and a client whose offered
    subprotocols were all refused fails the connection anyway (the WHATWG WebSocket rules); accepting only to
    close with 1002 would tell it less than the 403 and its JSON error, which carries the event id.
    """
    message = f"subprotocol {SUBPROTOCOL!r} required; offered: {name_list(list(websocket.scope.get('subprotocols') or []))}"
    body = orjson.dumps(refusal_body(FOREIGN_SUBPROTOCOL, HTTPStatus.FORBIDDEN, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await refuse_handshake(
        websocket.scope, websocket.send, HTTPStatus.FORBIDDEN, headers, body, close_code=CLOSE_PROTOCOL_ERROR, reason=message
    )


class WebSocketSession:
    def __init__(
        self, websocket: WebSocket, dispatcher: McpDispatcher, max_message_bytes: int, observer: correlation.DoorObserver | None = None
    ) -> None:
        self.websocket = websocket
        self.observer = observer  # each message's outcome and latency, for the door's metrics
        self.dispatcher = dispatcher
        self.max_message_bytes = max_message_bytes
        self.session_id = uuid.uuid4().hex
        self._send_lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        try:
            while True:
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data: bytes | str | None = message.get("text") if message.get("text") is not None else message.get("bytes")
                if data is None:
                    continue
                raw = data.encode() if isinstance(data, str) else data
                if len(raw) > self.max_message_bytes:
                    await self.websocket.close(code=CLOSE_TOO_BIG, reason=f"message exceeds {self.max_message_bytes} bytes")
                    break
                task = asyncio.create_task(self._answer(raw))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
        except WebSocketDisconnect:
            pass
        finally:
            if self._pending:  # answers still owed are finished, then dropped if the client has gone
                await asyncio.gather(*self._pending, return_exceptions=True)

    async def _answer(self, raw: bytes) -> None:
        record = correlation.begin("ws", session_id=self.session_id, observer=self.observer)
        try:
            try:
                payload = orjson.loads(raw)
            except orjson.JSONDecodeError:
                answer = await self.dispatcher.handle_bytes(raw)  # the parse error, worded as on every door
            else:
                payload, bare = with_jsonrpc_field(payload)
                answer = await self.dispatcher.handle_payload(payload)
                if bare and answer is not None:
                    answer = without_jsonrpc_field(answer)
        finally:
            correlation.finish(record)
        if answer is None:
            return
        async with self._send_lock:
            if self.websocket.application_state == WebSocketState.CONNECTED:
                try:
                    await self.websocket.send_text(orjson.dumps(answer).decode())
                except (WebSocketDisconnect, RuntimeError):
                    log.debug("ws session %s: client left before its answer", self.session_id)


def with_jsonrpc_field(payload: Any) -> tuple[Any, bool]:
    """Add ``"jsonrpc": "2.0"`` to objects that lack it; say whether any did (they are answered without it)."""
    if isinstance(payload, dict) and "jsonrpc" not in payload:
        return {"jsonrpc": "2.0", **payload}, True
    if isinstance(payload, list) and payload and all(isinstance(m, dict) and "jsonrpc" not in m for m in payload):
        return [{"jsonrpc": "2.0", **m} for m in payload], True
    return payload, False


def without_jsonrpc_field(answer: Any) -> Any:
    if isinstance(answer, list):
        return [without_jsonrpc_field(a) for a in answer]
    return {k: v for k, v in answer.items() if k != "jsonrpc"} if isinstance(answer, dict) else answer
