"""Legacy HTTP+SSE (MCP 2024-11-05): ``GET /sse`` opens the stream, ``POST /messages?sessionId=`` feeds it.

The stream's first event is ``endpoint`` (where to POST); each POST is answered 202 and its
JSON-RPC answer goes out on the stream as a ``message`` event. Behind a load balancer the POST may
reach another replica: that replica answers it and hands the answer over through the session bus
(Redis pub/sub). Streams are capped, idle sessions expire, and keep-alive comments flow so proxies
do not cut a quiet stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from sse_starlette.sse import EventSourceResponse

from ..protocol import correlation
from ..protocol.dispatcher import McpDispatcher
from ..protocol.errors import ErrorKind
from ..protocol.excerpts import excerpt
from ..redis_io.redis_link import RedisLink
from ..redis_io.session_bus import SessionBus
from ..settings import ServingSettings
from ..telemetry import GatewayMetrics
from . import openapi
from .bodies import BodyTooLarge, read_body, refusal

log = logging.getLogger(__name__)

SSE_PATH = "/sse"
MESSAGES_PATH = "/messages"
_END = b""  # put in a stream's queue to end it cleanly (an answer is never empty)
DRAINING_RETRY_AFTER_S = 1  # a draining replica's clients reconnect at once: the next replica is ready now
FULL_RETRY_AFTER_S = 5  # a full replica's: streams end as clients leave or sessions expire
UNKNOWN_SESSION = "unknown_session"  # the refusal kind of a sessionId no replica holds


@dataclass(frozen=True)
class SseLimits:
    max_streams: int
    keepalive_s: float
    idle_s: float  # a session with no message for this long ends (its stream closes, its id is forgotten)
    max_body_bytes: int


def local_sessions(serving: ServingSettings, metrics: GatewayMetrics, max_body_bytes: int, link: RedisLink | None = None) -> SseSessions:
    """The sessions of one replica; shared with the others through Redis when ``link`` is given."""
    limits = SseLimits(serving.sse_max_streams, serving.sse_keepalive_s, serving.sse_session_idle_s, max_body_bytes)
    return SseSessions(SessionBus(link, ttl_s=serving.sse_session_idle_s + serving.sse_keepalive_s), limits, metrics)


class SseSessions:
    """The streams this replica holds: session id -> the queue its stream reads."""

    def __init__(self, bus: SessionBus, limits: SseLimits, metrics: GatewayMetrics) -> None:
        self.bus = bus
        self.limits = limits
        self.owner = uuid.uuid4().hex[:12]  # this replica, written into the session keys (debugging aid)
        self.queues: dict[str, asyncio.Queue[bytes]] = {}
        self._streams_gauge = metrics.sse_streams  # counted up and down, not read at scrape time: gateway workers add theirs up
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def drain(self) -> None:
        """SIGTERM: end every open stream now (its client reconnects to a replica still ready) and refuse new ones.

        Called from the signal handler, so the streams are ended from the event loop, not from here.
        """
        self.draining = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._end_all)

    def _end_all(self) -> None:
        for queue in self.queues.values():
            queue.put_nowait(_END)

    def health(self) -> dict[str, Any]:
        why_local = self.bus.why_local()  # read once: the breaker may change between two reads
        return {
            "legacy_sse": {
                "open_streams": len(self.queues),
                "max_streams": self.limits.max_streams,
                "across_replicas": why_local is None,
                **({} if why_local is None else {"note": f"{why_local}: a POST /messages must reach the replica holding its stream"}),
            }
        }

    async def deliver(self, session_id: str, answer: bytes) -> bool:
        queue = self.queues.get(session_id)
        if queue is not None:
            queue.put_nowait(answer)
            return True
        return await self.bus.publish(session_id, answer)

    async def is_open(self, session_id: str) -> bool:
        return session_id in self.queues or await self.bus.known(session_id)

    async def stream(self, session_id: str, endpoint: str) -> AsyncIterator[dict[str, str]]:
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.queues[session_id] = queue
        await self.bus.claim(session_id, self.owner)
        relay = asyncio.create_task(self._relay(session_id, queue), name=f"sse-relay-{session_id}")
        self._streams_gauge.inc()
        try:
            yield {"event": "endpoint", "data": endpoint}
            last_message = time.monotonic()
            while True:
                idle_left = self.limits.idle_s - (time.monotonic() - last_message)
                if idle_left <= 0:
                    log.info("sse session %s expired after %.0f s without a message", session_id, self.limits.idle_s)
                    return
                try:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that lands as a message arrives.
                    async with asyncio.timeout(min(self.limits.keepalive_s, idle_left)):
                        answer = await queue.get()
                except TimeoutError:
                    await self.bus.refresh(session_id)
                    continue
                if answer is _END:
                    log.info("sse session %s: stream ended for shutdown", session_id)
                    return
                last_message = time.monotonic()
                yield {"event": "message", "data": answer.decode()}
        finally:
            relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
            self.queues.pop(session_id, None)
            self._streams_gauge.dec()
            await self.bus.release(session_id)

    async def _relay(self, session_id: str, queue: asyncio.Queue[bytes]) -> None:
        async for answer in self.bus.listen(session_id):
            queue.put_nowait(answer)


def add_sse_routes(app: FastAPI, dispatcher: McpDispatcher, sessions: SseSessions) -> None:
    limits = sessions.limits

    @app.get(SSE_PATH, response_class=EventSourceResponse, openapi_extra=openapi.SSE_STREAM)
    async def open_stream(request: Request) -> Response:
        if sessions.draining:
            message = "this gateway is shutting down; open the stream again (another replica will take it)"
            return refusal(503, "draining", message, {"Retry-After": str(DRAINING_RETRY_AFTER_S)})
        if len(sessions.queues) >= limits.max_streams:
            message = f"too many open SSE streams on this replica (sse_max_streams={limits.max_streams}); retry later"
            return refusal(503, "too_many_streams", message, {"Retry-After": str(FULL_RETRY_AFTER_S)})
        session_id = uuid.uuid4().hex
        endpoint = f"{request.scope.get('root_path', '')}{MESSAGES_PATH}?sessionId={session_id}"
        return EventSourceResponse(sessions.stream(session_id, endpoint), ping=limits.keepalive_s, headers={"Cache-Control": "no-store"})

    @app.post(MESSAGES_PATH, status_code=202, response_class=PlainTextResponse, openapi_extra=openapi.SSE_MESSAGES)
    async def post_message(request: Request) -> Response:
        session_id = request.query_params.get("sessionId")
        if not session_id:
            return refusal(400, "invalid_request", "sessionId query parameter is required (the endpoint event of GET /sse gives the URL)")
        record = correlation.current()
        if record is not None:
            record.session_id = session_id
        if not await sessions.is_open(session_id):
            return refusal(404, UNKNOWN_SESSION, f"unknown or expired session {excerpt(session_id)}: open a new stream with GET {SSE_PATH}")
        try:
            body = await read_body(request, limits.max_body_bytes)
        except BodyTooLarge:
            return refusal(413, ErrorKind.BODY_TOO_LARGE.value, f"request body exceeds {limits.max_body_bytes} bytes")
        answer = await dispatcher.handle_bytes(body)
        if answer is not None and not await sessions.deliver(session_id, orjson.dumps(answer)):
            return refusal(404, UNKNOWN_SESSION, f"session {excerpt(session_id)} closed before its answer could be delivered")
        return Response(b"Accepted", status_code=202, media_type="text/plain")
