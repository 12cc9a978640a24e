"""The rate limit in process against a real redis-server: without keys, the bucket is the client IP."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry

from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.edge.middleware import EdgeGuard
from mcp_classifier.edge.origins import Allowlist
from mcp_classifier.edge.ratelimit import RateLimiter
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.redis_io.redis_link import RedisLink
from mcp_classifier.telemetry import GatewayMetrics
from tests.support.redis_server import RedisServer


def test_rate_limit_per_client_ip_without_keys(tmp_path: Path) -> None:
    """No keys: the bucket is the client IP (in process, real Redis)."""
    redis = RedisServer(tmp_path).start()

    async def run() -> None:
        metrics = RedisMetrics(CollectorRegistry())
        link = RedisLink(redis.url, timeout_s=1, connect_timeout_s=1, failure_threshold=3, cooldown_s=1, metrics=metrics)
        await link.start()
        guard = EdgeGuard(
            keys=ApiKeys(None, None),
            hosts=Allowlist("*"),
            origins=Allowlist("localhost"),
            limiter=RateLimiter(link, limit=3, window_s=30, metrics=metrics),
            metrics=GatewayMetrics(),
        )
        scope = {"type": "http", "path": "/mcp", "headers": [(b"host", b"x")], "client": ("10.0.0.1", 5555)}
        other = {**scope, "client": ("10.0.0.2", 5555)}
        try:
            answers = [await guard.check(scope) for _ in range(5)]
            assert answers[:3] == [None, None, None]
            status, _, headers = answers[3]
            assert status == 429 and 1 <= int(headers["Retry-After"]) <= 30
            assert await guard.check(other) is None  # another IP, another budget
            assert metrics.rate_limited._value.get() == 2
        finally:
            await link.close()

    try:
        asyncio.run(run())
    finally:
        redis.stop()
