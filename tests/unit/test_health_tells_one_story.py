"""/health's legacy_sse and cache.redis describe the same Redis: one story, whatever Redis there is.

An embedded Redis must not show as `cache.redis.up: true` beside `legacy_sse: "no Redis"`. The real
RedisRuntime and RedisLink report the cache (the link is never started: no Redis is needed), over
the fake backend, in process.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mcp_classifier.cache.runtime import RedisRuntime
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.redis_io.redis_link import RedisLink
from mcp_classifier.redis_io.session_bus import SessionBus
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.sse import SseLimits, SseSessions
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"  # never dialled: the link is not started here


class ReportOnly(RedisRuntime):
    """The runtime's /health section over a given link, without starting or finding any Redis."""

    def __init__(self, link: RedisLink | None) -> None:
        self.config = Settings().cache
        self.link = link
        self.cache = None
        self.embedded = None

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


def link(mode: str, *, down: bool = False) -> RedisLink:
    made = RedisLink(
        UNREACHABLE_REDIS,
        timeout_s=1,
        connect_timeout_s=1,
        failure_threshold=1,
        cooldown_s=60,
        metrics=RedisMetrics(CollectorRegistry()),
        label=mode,
    )
    if down:
        made.breaker.record_failure()  # one failure opens it (threshold 1), as an outage would
    return made


def health(redis: RedisLink | None) -> dict[str, Any]:
    backend = FakeBackend()
    settings = Settings()
    metrics = GatewayMetrics()
    limits = SseLimits(
        settings.serving.sse_max_streams, settings.serving.sse_keepalive_s, settings.serving.sse_session_idle_s, DEFAULT_MAX_BODY_BYTES
    )
    sessions = SseSessions(SessionBus(redis, ttl_s=settings.serving.sse_session_idle_s), limits, metrics)
    app = gateway_app(
        build_dispatcher(settings, backend),
        backend,
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
        lifecycle=Lifecycle(backend, services=[ReportOnly(redis)]),
        metrics=metrics,
        sse_sessions=sessions,
    )
    with asgi_client(app) as client:
        answer: dict[str, Any] = client.get("/health").json()
    return answer


@pytest.mark.parametrize(
    ("mode", "down", "across", "why"),
    [
        ("embedded", False, False, "this replica's own"),
        ("external", True, False, "Redis is down"),
        ("external", False, True, None),
    ],
    ids=["embedded", "external-down", "external-up"],
)
def test_legacy_sse_agrees_with_the_cache_section(mode: str, down: bool, across: bool, why: str | None) -> None:
    answer = health(link(mode, down=down))
    redis, sse = answer["cache"]["redis"], answer["legacy_sse"]
    assert (redis["mode"], redis["up"]) == (mode, not down)
    assert sse["across_replicas"] is across
    assert "no Redis" not in sse.get("note", ""), "a Redis /health reports is never called absent"
    if why is None:
        assert "note" not in sse
    else:
        assert why in sse["note"] and "POST /messages must reach the replica holding its stream" in sse["note"]


def test_without_redis_both_say_there_is_none() -> None:
    answer = health(None)
    assert "redis" not in answer["cache"]
    assert answer["legacy_sse"]["across_replicas"] is False and answer["legacy_sse"]["note"].startswith("no Redis")
