"""Feedback from use through a real Redis: shared by two gateways, vectors only, capped and expired.

Two app instances, each with its own tool filter, Redis link and in-process copies, share one redis-server, as two
gateway replicas do. The filter's ranking rules themselves are pinned on the fake backend (tests/unit/test_tool_feedback.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from mcp_classifier.cache.tool_feedback import FEEDBACK_KEY_PREFIX, TOKEN_SUFFIX
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.redis_io.redis_link import RedisLink
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import DEFAULT_MAX_BODY_BYTES, closed_port
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app
from tests.support.redis_server import RedisServer

TOOLS = [
    {"name": "weather__forecast", "description": "Weather forecast for a city: temperature and wind."},
    {"name": "calendar__list_events", "description": "List calendar events and meetings for a day."},
    {"name": "slack__post_message", "description": "Post a message to a Slack channel."},
    {"name": "jira__create_issue", "description": "Create a Jira issue in a project."},
]
QUERY = "do I need an umbrella in Zanzibar tomorrow"
PAST = "umbrella needed in Zanzibar tomorrow? cardamom harbour drizzle"  # words no tool text has


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("feedback-redis")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def empty(redis: RedisServer) -> None:
    redis.client().flushall()


@contextmanager
def gateway(url: str, **overrides: Any) -> Iterator[httpx.Client]:
    """One gateway app with feedback on, its own Redis link (started and closed with the app) and a fake model."""
    backend, settings = FakeBackend(), Settings(tool_feedback=True, **overrides)
    link = RedisLink(url, timeout_s=1, connect_timeout_s=1, failure_threshold=3, cooldown_s=1, metrics=RedisMetrics(CollectorRegistry()))
    tool_filter = build_tool_filter(settings, backend, link)
    lifecycle = Lifecycle(backend, services=[link, tool_filter.embeddings])
    dispatcher = build_dispatcher(settings, backend, tool_filter)
    app = gateway_app(dispatcher, backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, lifecycle=lifecycle, tool_filter=tool_filter)
    with asgi_client(app) as client:
        yield client


def ranked(client: httpx.Client, tools: list[dict[str, Any]] = TOOLS) -> dict[str, float]:
    """Tool name -> score, best first."""
    response = client.post("/v1/tools/filter", json={"query": QUERY, "tools": tools, "top_k": len(tools), "threshold": -1.0})
    assert response.status_code == 200 and response.json()["filtered"], response.text
    body = response.json()
    return dict(zip([tool["name"] for tool in body["tools"]], body["scores"]))


def give(client: httpx.Client, query: str = PAST, tool: dict[str, Any] = TOOLS[0]) -> dict[str, Any]:
    response = client.post("/v1/tools/feedback", json={"query": query, "called": [tool]})
    assert response.status_code == 200, response.text
    return response.json()


def test_feedback_posted_to_one_gateway_changes_the_ranking_on_the_other(redis: RedisServer) -> None:
    with gateway(redis.url, tool_feedback_refresh_s=0) as first, gateway(redis.url, tool_feedback_refresh_s=0) as second:
        before = ranked(second)
        assert next(iter(before)) != "weather__forecast"
        assert give(first) == {"stored": True, "tools": 1}
        after = ranked(second)
        assert next(iter(after)) == "weather__forecast" and after["weather__forecast"] > before["weather__forecast"]
        assert {k: v for k, v in after.items() if k != "weather__forecast"} == {k: v for k, v in before.items() if k != "weather__forecast"}
        assert ranked(second) == after  # read again: from the second gateway's own copy, the same
        give(second, "is it raining in Zanzibar", TOOLS[0])
        assert ranked(first)["weather__forecast"] >= after["weather__forecast"]  # and back the other way


def test_a_gateway_reads_a_known_lists_feedback_again_in_the_background_within_the_refresh_time(redis: RedisServer) -> None:
    with gateway(redis.url) as first, gateway(redis.url, tool_feedback_refresh_s=0.3) as second:
        before = ranked(second)  # the list's first request: its feedback read, none yet
        give(first)
        assert ranked(second) == before  # answered from the copy: no request waits on Redis
        deadline = time.monotonic() + 10
        while ranked(second) == before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert next(iter(ranked(second))) == "weather__forecast"  # read again behind a request, once 0.3 s old


def test_no_request_text_is_kept_in_redis_only_vectors(redis: RedisServer) -> None:
    with gateway(redis.url) as client:
        give(client)
        example = "drizzle forecast for the harbour of Zanzibar"
        ranked(client, [{**TOOLS[0], "examples": [example]}, *TOOLS[1:]])  # examples are cached in Redis too
        time.sleep(0.3)  # the examples' vectors are written behind the answer
    store = redis.client()
    keys = list(store.scan_iter(count=1000))
    assert any(key.startswith(FEEDBACK_KEY_PREFIX.encode()) for key in keys)
    everything = b"\n".join([*keys, *(_values(store, key) for key in keys)]).lower()
    words = {word.lower() for text in (PAST, QUERY, example) for word in re.findall(r"[A-Za-z]{5,}", text)}
    assert words and all(word.encode() not in everything for word in words), sorted(w for w in words if w.encode() in everything)


def _values(store: Any, key: bytes) -> bytes:
    kind = store.type(key)
    if kind == b"string":
        return store.get(key) or b""
    if kind == b"list":
        return b"".join(store.lrange(key, 0, -1))
    raise AssertionError(f"unexpected Redis type {kind!r} at {key!r}")


def test_each_tool_keeps_at_most_the_cap_and_nothing_outlives_the_ttl(redis: RedisServer) -> None:
    with (
        gateway(redis.url, tool_feedback_max_vectors=3, tool_feedback_ttl_s=2) as first,
        gateway(redis.url, tool_feedback_refresh_s=0) as second,
    ):
        before = ranked(second)
        for number in range(5):
            give(first, f"umbrella number {number} for Zanzibar")
        store = redis.client()
        (key,) = [k for k in store.scan_iter(match=FEEDBACK_KEY_PREFIX + "*") if not k.endswith(TOKEN_SUFFIX.encode())]
        assert store.llen(key) == 3  # the newest three
        assert 0 < store.pttl(key) <= 2000 and 0 < store.pttl(key + TOKEN_SUFFIX.encode()) <= 2000
        assert ranked(second) != before
        deadline = time.monotonic() + 10
        while list(store.scan_iter(match=FEEDBACK_KEY_PREFIX + "*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not list(store.scan_iter(match=FEEDBACK_KEY_PREFIX + "*"))
        assert ranked(second) == before  # expired: ranked as if never given


def test_without_redis_feedback_says_nothing_was_kept_and_the_filter_still_ranks() -> None:
    with gateway(f"redis://127.0.0.1:{closed_port()}/0") as client:
        answer = give(client)
        assert answer["stored"] is False and "nothing was kept" in answer["reason"]
        assert next(iter(ranked(client))) != "weather__forecast"
        metrics = client.get("/metrics").text
        assert 'mcp_classifier_tool_feedback_total{outcome="unavailable"} 1.0' in metrics
