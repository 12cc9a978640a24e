"""The HTTP doors from the moment the port is bound: the MCP handshake answers while the full app still loads.

uvicorn binds only once its app is imported, built and started. Importing FastAPI and building the gateway's
app took about half a second on a 2-core host, which put the first `initialize` answer past one second after
the process started. uvicorn serves `OpeningApp` instead, which is light, and the full app is built after the
bind. Until it is up:

* a `POST /mcp` whose messages are all handshake methods (`initialize`, the `initialized` notification,
  `ping`, `tools/list`, `server/discover`) is answered at once, through the same dispatcher and the same
  edge guard and correlation middlewares as the full app's route, so the answer, a refusal and the log line
  are the ones the full app would give;
* every other request waits for the full app, up to the request deadline, and is then served by it (503,
  the server is starting, where the deadline passes first).

Once the full app is up, every request goes straight to it. Its lifespan (the services, the backend's
background start) runs inside this app's own.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple

import orjson

from ..protocol.dispatcher import McpDispatcher
from ..protocol.refusals import refusal_body
from ..util.asgi import ASGIApp, Receive, Scope, Send
from .jsonrpc_post import answer_post
from .mcp_paths import canonical_mcp_path

log = logging.getLogger(__name__)

HANDSHAKE_METHODS = frozenset({"initialize", "notifications/initialized", "ping", "tools/list", "server/discover"})
STARTING = "starting"  # the refusal kind of a request the full app was not up in time for
TRY_AGAIN_LATER = 1013  # WebSocket close code: the server cannot take the connection yet


class FullApp(NamedTuple):
    """The app that serves every request once built, and its lifespan (entered once, left at shutdown)."""

    app: ASGIApp
    lifespan: Callable[[], AbstractAsyncContextManager[object]]


def handshake_only(body: bytes) -> bool:
    """One JSON-RPC message, or a batch, whose methods all need neither the model nor the full app."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    messages = payload if isinstance(payload, list) and payload else [payload]
    return all(isinstance(message, dict) and message.get("method") in HANDSHAKE_METHODS for message in messages)


async def read_body(receive: Receive, limit: int) -> tuple[list[dict[str, Any]], bytes | None]:
    """The request's messages as received, and its whole body where it ended within ``limit`` bytes (else None)."""
    messages: list[dict[str, Any]] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None  # the client went away
        size += len(message.get("body", b""))
        if size > limit:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def replaying(messages: list[dict[str, Any]], receive: Receive) -> Receive:
    """``receive`` with the messages already read handed out first, so whoever serves the request reads it whole."""
    pending = list(messages)

    async def replay() -> dict[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replay


def header_values(scope: Scope, name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


async def send_json(send: Send, status: int, answer: Any | None, headers: dict[str, str] | None = None) -> None:
    """The full app's JSON answer as Starlette writes it: no body and no content type for an empty answer."""
    body = b"" if answer is None else orjson.dumps(answer)
    raw = [(b"content-length", str(len(body)).encode())]
    if answer is not None:
        raw.append((b"content-type", b"application/json"))
    raw.extend((key.lower().encode(), value.encode()) for key, value in (headers or {}).items())
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class HandshakeDoor:
    """`POST /mcp` as the full app's route answers it (transports.jsonrpc_post), for the handshake methods."""

    def __init__(self, dispatcher: McpDispatcher, observe: Callable[[str, int, float], None]) -> None:
        self.dispatcher = dispatcher
        self.observe = observe  # the full route's request metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        _, body = await read_body(receive, sys.maxsize)  # replayed whole by OpeningApp, which checked its size
        status, answer = await answer_post(
            self.dispatcher,
            body or b"",
            header_values(scope, b"mcp-protocol-version"),
            header_values(scope, b"mcp-method"),
            header_values(scope, b"mcp-name"),
        )
        await send_json(send, status, answer)
        self.observe("/mcp", status, time.perf_counter() - started)


class OpeningApp:
    """What uvicorn serves: the handshake door until the full app is up, then the full app alone."""

    def __init__(
        self,
        handshake: ASGIApp,
        build: Callable[[], Awaitable[FullApp]],
        *,
        max_body_bytes: int,
        wait_s: float,
        on_failure: Callable[[BaseException], None],
    ) -> None:
        self._handshake = handshake  # HandshakeDoor under the full app's middlewares
        self._build = build
        self._max_body_bytes = max_body_bytes
        self._wait_s = wait_s  # the request deadline: the longest a request waits for the full app
        self._on_failure = on_failure  # the full app could not be built or started: the server stops
        self._full: ASGIApp | None = None
        self._failure: BaseException | None = None
        self._settled = asyncio.Event()  # the full app is up, or failed
        self._closing = asyncio.Event()
        self._life: asyncio.Task[None] | None = None

    @property
    def is_open(self) -> bool:
        return self._full is not None

    @property
    def failure(self) -> BaseException | None:
        """Why the full app could not be built or started (None while it is, or once it is up)."""
        return self._failure

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if self._full is None and _is_jsonrpc_post(scope):
            messages, body = await read_body(receive, self._max_body_bytes)
            receive = replaying(messages, receive)
            if self._full is None and body is not None and handshake_only(body):
                await self._handshake(scope, receive, send)
                return
        full = self._full or await self._wait_for_full()
        if full is None:
            await self._refuse(scope, send)
            return
        await full(scope, receive, send)

    async def _wait_for_full(self) -> ASGIApp | None:
        try:
            async with asyncio.timeout(self._wait_s):
                await self._settled.wait()
        except TimeoutError:
            return None
        return self._full

    async def _refuse(self, scope: Scope, send: Send) -> None:
        message = (
            f"the server failed to start: {self._failure}"
            if self._failure is not None
            else f"the server is still starting after {self._wait_s:g} s; retry shortly"
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": TRY_AGAIN_LATER, "reason": "the server is starting"})
        elif scope["type"] == "http":
            await send_json(send, 503, refusal_body(STARTING, 503, message), {"Retry-After": "1"})

    # ---- lifespan: the full app is built after the bind, and started and stopped inside this one's ------------
    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup: answered at once, so uvicorn binds now
        self._life = asyncio.create_task(self._run_full(), name="full-app")
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown: uvicorn has stopped taking requests and finished those in flight
        if not self._settled.is_set():
            self._life.cancel()
        self._closing.set()
        await asyncio.gather(self._life, return_exceptions=True)
        await send({"type": "lifespan.shutdown.complete"})

    async def _run_full(self) -> None:
        try:
            full = await self._build()
            async with full.lifespan():
                self._full = full.app
                self._settled.set()
                await self._closing.wait()
        except Exception as exc:  # said here; a failed start also stops the process (on_failure)
            if self._settled.is_set():  # it served, and failed while stopping: the process is ending anyway
                log.exception("the HTTP app failed while stopping")
                return
            log.exception("the HTTP app failed to start")
            self._failure = exc
            self._settled.set()
            self._on_failure(exc)


def _is_jsonrpc_post(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] == "POST" and canonical_mcp_path(scope["path"]) == "/mcp"
