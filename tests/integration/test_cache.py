"""The Redis cache of identical queries (docs/security.md, "The cache"), in process: the real LocalBatchingBackend
behind it, real redis-servers.

The same cache behind real gateway processes is tested in tests/e2e/test_cache_http.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mcp_classifier.backend.base import BackendHealth
from mcp_classifier.cache import CachingBackend
from mcp_classifier.classify.registry import DEFAULT
from mcp_classifier.classify.results import ClassificationResult
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.redis_io.redis_link import RedisLink
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_local_backend
from tests.support import async_wait_for
from tests.support.fake_backend import FakeBackend
from tests.support.redis_server import RedisServer, make_tls_files, redis_binary, speaks_tls

pytestmark = pytest.mark.slow


# ---- helpers -----------------------------------------------------------------------------------
class CountingBackend:
    """Wraps a real backend and counts the predict calls that reach it; can fake a new category-set version."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.texts: list[str] = []
        self.version_suffix = ""

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        health = await self.inner.health(need_info=need_info)
        if self.version_suffix and health.info is not None:
            info = dataclasses.replace(health.info, category_set_version=health.info.category_set_version + self.version_suffix)
            health = dataclasses.replace(health, info=info)
        return health

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.predict(texts, classifier)


def make_link(url: str, metrics: RedisMetrics, **kw: Any) -> RedisLink:
    options = dict(timeout_s=1.0, connect_timeout_s=1.0, failure_threshold=3, cooldown_s=0.5)
    options.update(kw)
    return RedisLink(url, metrics=metrics, **options)


# ---- in-process: single-flight and version changes, real backend + real Redis ----------------------
@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def test_single_flight_and_version_change_in_process(redis_server: RedisServer) -> None:
    asyncio.run(_single_flight_and_versions(redis_server))


async def _single_flight_and_versions(redis_server: RedisServer) -> None:
    counting = CountingBackend(build_local_backend(Settings(backend="local")))
    metrics = RedisMetrics(CollectorRegistry())
    link = make_link(redis_server.url, metrics)
    cache = CachingBackend(counting, link, metrics=metrics, ttl_s=60, max_text_chars=2048, max_value_bytes=16384)
    await link.start()
    await cache.start()
    text = "How do I reverse a linked list in Python?"
    try:
        # 50 identical concurrent misses: exactly one backend call.
        answers = await asyncio.gather(*(cache.predict([text]) for _ in range(50)))
        assert counting.calls == 1, counting.calls
        assert counting.texts == [text]
        assert all(a == answers[0] for a in answers)
        assert metrics.shared._value.get() == 49
        assert await async_wait_for(lambda: len(redis_server.keys()) == 1 and not cache._inflight)

        # A later identical (after normalisation) request is a hit: same answer, no backend call.
        (again,) = await cache.predict(["  HOW do i reverse a LINKED list in python? "])
        assert again == answers[0][0]
        assert counting.calls == 1 and metrics.hits._value.get() == 1

        # A batch mixing a cached and a new text: one backend call, for the new text only.
        mixed = await cache.predict([text, "Why is the sky blue?", text])
        assert counting.calls == 2 and counting.texts[-1:] == ["Why is the sky blue?"]
        assert mixed[0] == mixed[2] == answers[0][0]
        assert await async_wait_for(lambda: len(redis_server.keys()) == 2 and not cache._inflight)

        # The backend reports a new category-set version (a hot reload): new keys, the old answer
        # is never served. Reading the info re-keys at once; otherwise within info_ttl_s.
        counting.version_suffix = "-reloaded"
        await cache.health(need_info=True)
        await cache.predict([text])
        assert counting.calls == 3, "an answer cached under the old category-set version was served"
        assert await async_wait_for(lambda: len(redis_server.keys()) == 3)

        counting.version_suffix = "-reloaded-again"
        cache.invalidate_versions()
        await cache.predict([text])
        assert counting.calls == 4
    finally:
        await cache.close()
        await link.close()


def test_wrong_redis_password_fails_open(tmp_path: Path) -> None:
    secured = RedisServer(tmp_path, password="s3cret-pw").start()

    async def run() -> None:
        metrics = RedisMetrics(CollectorRegistry())
        link = make_link(secured.url.replace("s3cret-pw", "wrong"), metrics)
        await link.start()
        try:
            assert await link.run("get", lambda c: c.get("x"), "default") == "default"
            assert metrics.redis_errors.labels("ping")._value.get() + metrics.redis_errors.labels("get")._value.get() >= 2
        finally:
            await link.close()

    try:
        asyncio.run(run())
    finally:
        secured.stop()


def test_rediss_tls_url(tmp_path: Path) -> None:
    """rediss:// with the CA from the URL query (redis-py reads ssl_* options from it), as --redis-url takes it."""
    binary = redis_binary()
    if not speaks_tls(binary):
        pytest.skip(f"{binary} was built without TLS (no OpenSSL in it)")
    server = RedisServer(tmp_path, password="tls-pw", tls=make_tls_files(tmp_path)).start()  # a failed start fails

    async def run() -> None:
        metrics = RedisMetrics(CollectorRegistry())
        link = make_link(server.url, metrics)
        await link.start()
        try:
            assert await link.run("set", lambda c: c.set("mcp-classifier:tls-check", b"1", ex=60), None) is True
            assert await link.run("get", lambda c: c.get("mcp-classifier:tls-check"), None) == b"1"
            assert not link.breaker.is_open and metrics.redis_errors.labels("get")._value.get() == 0
            plain = make_link(server.url.replace("rediss://", "redis://").split("?")[0], metrics)  # no TLS: refused, fail-open
            await plain.start()
            assert await plain.run("get", lambda c: c.get("mcp-classifier:tls-check"), "fallback") == "fallback"
            await plain.close()
        finally:
            await link.close()

    try:
        asyncio.run(run())
    finally:
        server.stop()


def test_classify_batch_of_64_with_32_cached_makes_one_backend_call_for_the_misses(redis_server: RedisServer) -> None:
    asyncio.run(_classify_batch_behind_the_cache(redis_server))


async def _classify_batch_behind_the_cache(redis_server: RedisServer) -> None:
    from loadtests.harness.queries import TEXTS
    from mcp_classifier.wiring import build_dispatcher

    counting = CountingBackend(build_local_backend(Settings(backend="local")))
    metrics = RedisMetrics(CollectorRegistry())
    link = make_link(redis_server.url, metrics)
    cache = CachingBackend(counting, link, metrics=metrics, ttl_s=60, max_text_chars=2048, max_value_bytes=16384)
    dispatcher = build_dispatcher(Settings(), cache)
    texts = list(TEXTS[:64])
    await link.start()
    await cache.start()
    try:
        # 32 texts answered one at a time through classify_text first: they are in Redis now.
        singles = {}
        for text in texts[::2]:
            result = await dispatcher.call("tools/call", {"name": "classify_text", "arguments": {"text": text, "with_probabilities": True}})
            singles[text] = result["structuredContent"]
        assert await async_wait_for(lambda: len(redis_server.keys()) == 32 and not cache._inflight)
        calls_before = counting.calls
        batch = await dispatcher.call("tools/call", {"name": "classify_batch", "arguments": {"texts": texts, "with_probabilities": True}})
        assert batch["isError"] is False, batch
        assert counting.calls == calls_before + 1  # exactly one backend call...
        assert counting.texts[-32:] == texts[1::2]  # ...for the 32 misses only, in order
        results = batch["structuredContent"]["results"]
        assert len(results) == 64 and batch["structuredContent"]["classified"] == 64
        # every answer equals a single classify_text call: the cached ones exactly, the new ones too
        for text in texts[1::2]:
            result = await dispatcher.call("tools/call", {"name": "classify_text", "arguments": {"text": text, "with_probabilities": True}})
            singles[text] = result["structuredContent"]
        assert counting.calls == calls_before + 1  # those singles were hits: the batch had cached them
        assert results == [singles[t] for t in texts]
    finally:
        await cache.close()
        await link.close()


# ---- answers a caller gave up on (a fake slow backend: the rule is the cache's, not the model's) ----------
class SlowFakeBackend(FakeBackend):
    """Classifies after a pause, as a busy model does."""

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        await asyncio.sleep(0.3)
        return await super().predict(texts, classifier)


def test_answers_a_caller_gave_up_on_still_reach_the_cache_and_whoever_joined_them(redis_server: RedisServer) -> None:
    asyncio.run(_abandoned_call(redis_server))


async def _abandoned_call(redis_server: RedisServer) -> None:
    slow = SlowFakeBackend()
    metrics = RedisMetrics(CollectorRegistry())
    link = make_link(redis_server.url, metrics)
    cache = CachingBackend(slow, link, metrics=metrics, ttl_s=60, max_text_chars=2048, max_value_bytes=16384)
    await link.start()
    await cache.start()
    texts = ["refund my last order", "my parcel never arrived", "change my delivery address"]
    try:
        leader = asyncio.ensure_future(cache.predict(texts))
        await asyncio.sleep(0.05)
        follower = asyncio.ensure_future(cache.predict(texts[:1]))  # joins the leader's call
        await asyncio.sleep(0.05)
        leader.cancel()  # the caller hung up, or its deadline passed
        with pytest.raises(asyncio.CancelledError):
            await leader
        (joined,) = await follower
        assert joined == slow.answer(texts[0]) and len(slow.calls) == 1  # the follower got the abandoned call's answer
        assert await async_wait_for(lambda: len(redis_server.keys()) == len(texts) and not cache._inflight)
        assert await cache.predict(texts) == [slow.answer(t) for t in texts]
        assert len(slow.calls) == 1  # all three from the cache
    finally:
        await cache.close()
        await link.close()
