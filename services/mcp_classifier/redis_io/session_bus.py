"""Legacy SSE sessions across gateway replicas: a Redis key says a session is open, a channel carries its answers.

The replica that holds a client's ``GET /sse`` stream claims the session (a key with a TTL it
refreshes) and subscribes to the session's channel; a ``POST /messages`` that lands on another
replica is answered there and the answer is published on that channel. Without Redis, with an
embedded one (each replica has its own) or while Redis is down, sessions work within one replica
only: ``why_local`` says which, in the terms of /health's ``cache.redis``, so the two agree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from .redis_link import RedisLink

log = logging.getLogger(__name__)

KEY_PREFIX = "mcp-classifier:sse:"


class SessionBus:
    def __init__(self, link: RedisLink | None, *, ttl_s: float) -> None:
        self.link = link
        self.ttl_ms = max(1, int(ttl_s * 1000))

    def why_local(self) -> str | None:
        """Why sessions stay within this replica now, or None when other replicas reach them (an external Redis, up)."""
        if self.link is None:
            return "no Redis"
        if self.link.label == "embedded":
            return "the Redis is this replica's own (cache.redis.mode: embedded)"
        if not self.link.up:
            return "Redis is down (cache.redis.up: false)"
        return None

    @staticmethod
    def key(session_id: str) -> str:
        return KEY_PREFIX + session_id

    async def claim(self, session_id: str, owner: str) -> None:
        if self.link is not None:
            await self.link.run("sse_claim", lambda c: c.set(self.key(session_id), owner, px=self.ttl_ms), None)

    async def refresh(self, session_id: str) -> None:
        if self.link is not None:
            await self.link.run("sse_refresh", lambda c: c.pexpire(self.key(session_id), self.ttl_ms), None)

    async def release(self, session_id: str) -> None:
        if self.link is not None:
            await self.link.run("sse_release", lambda c: c.delete(self.key(session_id)), None)

    async def known(self, session_id: str) -> bool:
        """Open on some replica (False without Redis: then only the local replica's sessions exist)."""
        if self.link is None:
            return False
        return bool(await self.link.run("sse_known", lambda c: c.exists(self.key(session_id)), 0))

    async def publish(self, session_id: str, payload: bytes) -> bool:
        """True when a replica's stream received it (one subscriber: the owner)."""
        if self.link is None:
            return False
        receivers = await self.link.run("sse_publish", lambda c: c.publish(self.key(session_id), payload), 0)
        return bool(receivers)

    async def listen(self, session_id: str) -> AsyncIterator[bytes]:
        """Answers published for this session by other replicas, until cancelled.

        Uses its own connection (a subscribed connection can do nothing else). If Redis goes
        away the listening ends quietly: the session keeps working for POSTs to this replica.
        """
        client = self.link.client if self.link is not None else None
        if client is None:
            return
        pubsub: Any = client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.key(session_id))
            while True:
                message = await pubsub.get_message(timeout=None)
                if message is not None and message.get("type") == "message":
                    yield message["data"]
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - Redis errors of any kind: this stream goes on without the bus
            log.warning("sse session %s: Redis subscription lost (%s); only POSTs to this replica reach it now", session_id, exc)
        finally:
            try:
                await pubsub.aclose()
            except Exception:  # noqa: BLE001 - closing a broken subscription must not fail the stream
                pass
