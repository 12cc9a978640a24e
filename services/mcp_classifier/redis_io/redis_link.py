"""One fail-open Redis connection for the gateway: short timeouts, a circuit breaker, a background probe.

Every call goes through ``RedisLink.run(op, fn, default)``: if Redis is slow, down or refusing,
the caller gets ``default`` (a cache miss, an unchecked rate limit) and the gateway keeps
answering. Outages are counted (metrics) and logged once, not once per request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .breaker import CircuitBreaker
from .metrics import RedisMetrics

if TYPE_CHECKING:
    import redis.asyncio as aioredis

log = logging.getLogger(__name__)
T = TypeVar("T")


def _import_redis() -> tuple[type[BaseException], ...]:
    """Import redis-py (about a third of the gateway's own import time) and return the errors a call may raise.

    Imported when the link starts, on a worker thread, so the doors answer the handshake without waiting for it.
    """
    import redis.asyncio  # noqa: F401 - imported here for the side effect of loading it off the event loop
    from redis.exceptions import RedisError

    return (TimeoutError, RedisError, OSError)


def redact_url(url: str) -> str:
    """The URL with any password replaced, for logs and /health."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class RedisLink:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        failure_threshold: int,
        cooldown_s: float,
        metrics: RedisMetrics,
        label: str = "external",
    ) -> None:
        self.url = url
        self._safe_url = redact_url(url)  # for /health and logs: never the password
        self.label = label  # "external" or "embedded"
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self.metrics = metrics
        self.breaker = CircuitBreaker(failure_threshold, cooldown_s, on_open=self._opened, on_close=self._closed)
        self.client: aioredis.Redis | None = None
        self._failures: tuple[type[BaseException], ...] = (TimeoutError, OSError)  # with RedisError once redis-py is loaded
        self._probe_task: asyncio.Task[None] | None = None
        self._latency: dict[str, Any] = {}  # op -> bound histogram child (labels() costs a lock and a dict lookup)
        metrics.redis_up.set(1)

    # ---- lifetime --------------------------------------------------------------------------
    async def start(self) -> None:
        self._failures = await asyncio.to_thread(_import_redis)
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        from redis.exceptions import ConnectionError as RedisConnectionError

        self.client = aioredis.from_url(
            self.url,
            # No per-socket-operation timeout: run() puts one deadline around the whole call instead
            # (redis-py's socket_timeout wraps every send in wait_for, a task per command). A call
            # cut short by that deadline makes redis-py drop the connection, never reuse it mid-reply.
            socket_timeout=None,
            socket_connect_timeout=self._connect_timeout_s,
            # One immediate retry on a refused/reset connection only: a pooled connection may be
            # stale after Redis restarted. Timeouts are never retried (they would double the wait).
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            health_check_interval=0,
        )
        ok = await self.run("ping", lambda c: c.ping(), False)
        if ok:
            log.info("cache: Redis at %s (%s) reachable", self._safe_url, self.label)
        else:
            log.warning("cache: Redis at %s (%s) not reachable; classifying without it until it is", self._safe_url, self.label)

    async def close(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            await asyncio.gather(self._probe_task, return_exceptions=True)
            self._probe_task = None
        if self.client is not None:
            try:
                await self.client.aclose()
            except Exception:  # noqa: BLE001 - closing a dead link must not fail shutdown
                pass
            self.client = None

    @property
    def up(self) -> bool:
        """Calls go to Redis now (the breaker is closed); /health's ``cache.redis.up``."""
        return not self.breaker.is_open

    def health(self) -> dict[str, Any]:
        return {"redis": {"url": self._safe_url, "mode": self.label, "up": self.up}}

    # ---- calls -----------------------------------------------------------------------------
    async def run(self, op: str, fn: Callable[[aioredis.Redis], Awaitable[T]], default: T) -> T:
        """fn(client), or ``default`` when Redis is unavailable (breaker open, error, timeout)."""
        client = self.client
        if client is None or self.breaker.is_open:
            self.metrics.redis_skipped.labels(op).inc()
            if client is not None and self.breaker.probe_due():
                self._start_probe()
            return default
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout_s):
                result = await fn(client)
        except self._failures as exc:
            self._failed(op, exc)
            return default
        if self.breaker.consecutive_failures:
            self.breaker.record_success()
        hist = self._latency.get(op)
        if hist is None:
            hist = self._latency[op] = self.metrics.redis_latency.labels(op)
        hist.observe(time.perf_counter() - started)
        return result

    def _failed(self, op: str, exc: BaseException) -> None:
        self.metrics.redis_errors.labels(op).inc()
        if not self.breaker.record_failure():
            log.debug("redis %s failed: %s", op, exc)
        else:
            log.warning(
                "cache: Redis at %s failed %d times in a row (last: %s: %s); skipping it for %.1f s, then probing",
                self._safe_url,
                self.breaker.failure_threshold,
                type(exc).__name__,
                exc,
                self.breaker.cooldown_s,
            )

    # ---- breaker transitions and the background probe ---------------------------------------
    def _opened(self) -> None:
        self.metrics.outages.inc()
        self.metrics.redis_up.set(0)

    def _closed(self) -> None:
        self.metrics.redis_up.set(1)
        log.warning("cache: Redis at %s is back; using it again", self._safe_url)

    def _start_probe(self) -> None:
        if self._probe_task is None or self._probe_task.done():
            self._probe_task = asyncio.create_task(self._probe(), name="redis-probe")

    async def _probe(self) -> None:
        client = self.client
        if client is None:
            return
        try:
            # Drop every pooled connection first: after a restart they are all dead, and each
            # would otherwise fail one live request before being replaced.
            await client.connection_pool.disconnect()
            async with asyncio.timeout(self._connect_timeout_s + self._timeout_s):
                await client.ping()
        except self._failures as exc:
            log.debug("redis probe failed: %s", exc)
            self.breaker.record_probe_failure()
            return
        self.breaker.record_success()
