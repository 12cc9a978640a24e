"""Feedback from use and examples on a fake backend: the lift's rule, the door's answers, the in-process store's cap and TTL.

The same rules against a real Redis shared by two gateways: tests/integration/test_tool_feedback_redis.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from mcp_classifier.cache.embeddings import ToolEmbeddings
from mcp_classifier.cache.tool_feedback import FeedbackVectors
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.toolfilter.past_queries import PastQueries, lift
from mcp_classifier.toolfilter.tool_filter import PastQueryOptions, ToolFilter, tool_name
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend, bag_of_words_vector
from tests.support.http_app import tool_filter_app

TOOLS = [
    {"name": "weather__forecast", "description": "Weather forecast for a city: temperature and wind."},
    {"name": "calendar__list_events", "description": "List calendar events and meetings for a day."},
    {"name": "slack__post_message", "description": "Post a message to a Slack channel."},
    {"name": "jira__create_issue", "description": "Create a Jira issue in a project."},
    {"name": "drive__share_file", "description": "Share a Drive file with a person."},
]
QUERY = "do I need an umbrella in Oslo tomorrow"  # the fake encoder's words: no tool says umbrella
PAST = "umbrella needed in Oslo tomorrow?"  # a past request of the weather tool, in the user's words


def _filter_body(tools: list[dict[str, Any]], query: str = QUERY) -> dict[str, Any]:
    return {"query": query, "tools": tools, "top_k": len(tools), "threshold": -1.0}


def _ranked(client: httpx.Client, tools: list[dict[str, Any]], query: str = QUERY) -> tuple[list[str], dict[str, float]]:
    response = client.post("/v1/tools/filter", json=_filter_body(tools, query))
    assert response.status_code == 200, response.text
    body = response.json()
    names = [tool_name(tool) for tool in body["tools"]]
    return names, dict(zip(names, body["scores"]))


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, GatewayMetrics]]:
    """A gateway with feedback on (no Redis: the in-process store), or with the settings the test's param names."""
    overrides = getattr(request, "param", {"tool_feedback": True})
    metrics = GatewayMetrics()
    with asgi_client(tool_filter_app(Settings(**overrides), FakeBackend(), metrics)) as client:
        yield client, metrics


def _feedback_count(metrics: GatewayMetrics, outcome: str) -> float:
    return metrics.tool_feedback.labels(outcome)._value.get()


def test_lift_only_raises_a_tool_towards_its_best_past_request_and_leaves_the_others_alone() -> None:
    cosines = np.array([[0.2, 0.5, 0.1]])
    query = np.array([[1.0, 0.0]])
    past = PastQueries(np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32), np.array([0, 0, 1]))
    lifted = lift(cosines, query, past, 0.5)
    # tool 0: best past cosine 1.0 -> 0.2 + 0.5 * 0.8; tool 1: its past request (0.0) is below its own 0.5: kept;
    # tool 2: no history: exactly as it was
    assert lifted[0].tolist() == pytest.approx([0.6, 0.5, 0.1])
    assert lift(cosines, query, past, 0.0) is cosines
    assert lift(cosines, query, PastQueries(np.zeros((0, 2), np.float32), np.zeros(0, np.int64)), 0.5) is cosines


def test_feedback_lifts_the_called_tool_and_every_tool_without_history_keeps_its_score(
    gateway: tuple[httpx.Client, GatewayMetrics],
) -> None:
    client, metrics = gateway
    names_before, before = _ranked(client, TOOLS)
    assert names_before[0] != "weather__forecast"
    response = client.post("/v1/tools/feedback", json={"query": PAST, "called": [TOOLS[0]]})
    assert response.status_code == 200 and response.json() == {"stored": True, "tools": 1}
    names_after, after = _ranked(client, TOOLS)
    assert names_after[0] == "weather__forecast" and after["weather__forecast"] > before["weather__forecast"]
    # no history: the same cosine, and the same order among themselves
    assert {n: s for n, s in after.items() if n != "weather__forecast"} == {n: s for n, s in before.items() if n != "weather__forecast"}
    assert [n for n in names_after if n != "weather__forecast"] == [n for n in names_before if n != "weather__forecast"]
    assert _feedback_count(metrics, "stored") == 1


def test_with_no_history_the_ranking_is_exactly_the_one_without_the_feature() -> None:
    rankings = []
    for on in (False, True):
        with asgi_client(tool_filter_app(Settings(tool_feedback=on), FakeBackend())) as client:
            rankings.append(client.post("/v1/tools/filter", json=_filter_body(TOOLS, "share the file with the team")).json())
    assert rankings[0] == rankings[1]


def test_examples_sent_with_a_tool_rank_it_as_past_requests_would_and_are_cached(gateway: tuple[httpx.Client, GatewayMetrics]) -> None:
    client, _ = gateway
    names_before, before = _ranked(client, TOOLS)
    with_examples = [{**TOOLS[0], "examples": [PAST, "is it going to rain"]}, *TOOLS[1:]]
    names_after, after = _ranked(client, with_examples)
    assert names_after[0] == "weather__forecast" and after["weather__forecast"] > before["weather__forecast"]
    assert {n: s for n, s in after.items() if n != "weather__forecast"} == {n: s for n, s in before.items() if n != "weather__forecast"}
    openai = [{"type": "function", "function": {"name": "weather__forecast", "description": TOOLS[0]["description"], "examples": [PAST]}}]
    assert _ranked(client, [*openai, *TOOLS[1:]])[0][0] == "weather__forecast"  # inside an OpenAI tool's function too


def test_examples_are_embedded_as_queries_once_and_then_served_from_the_cache() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        embeddings = ToolEmbeddings(backend, None, capacity=100, ttl_s=60)
        tool_filter = ToolFilter(embeddings, max_text_length=4096, max_tools=100)
        tools = [{**TOOLS[0], "examples": [PAST]}, *TOOLS[1:]]
        await tool_filter.select(QUERY, tools, top_k=3, threshold=-1.0)
        assert ("query", [PAST]) in backend.embed_calls  # an example is a request: embedded as a query
        backend.embed_calls.clear()
        await tool_filter.select(QUERY, tools, top_k=3, threshold=-1.0)
        assert backend.embed_calls == [("query", [QUERY])]  # the example's vector was kept
        await embeddings.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"called": [TOOLS[0]]}, "query"),
        ({"query": "  ", "called": [TOOLS[0]]}, "query"),
        ({"query": "x", "called": []}, "`called`"),
        ({"query": "x", "called": "weather__forecast"}, "`called`"),
        ({"query": "x"}, "`called`"),
        ({"query": "x", "called": [{"description": "no name"}]}, "name"),
        ({"query": "x", "called": ["weather__forecast"]}, "object"),
        ({"query": "x", "called": [TOOLS[0]] * 65}, "`called`"),
        ({"query": 5, "called": [TOOLS[0]]}, "query"),
        ({"query": "x", "called": [{**TOOLS[0], "examples": "rain"}]}, "examples"),
        ([TOOLS[0]], "`called`"),
    ],
)
def test_bad_feedback_is_400_with_a_reason(gateway: tuple[httpx.Client, GatewayMetrics], body: Any, fragment: str) -> None:
    client, metrics = gateway
    response = client.post("/v1/tools/feedback", json=body)
    assert response.status_code == 400 and fragment in response.json()["error"], response.text
    assert "eventId" in response.json()["data"]
    assert _feedback_count(metrics, "invalid") == 1


def test_bad_examples_are_refused_at_the_filter_too(gateway: tuple[httpx.Client, GatewayMetrics]) -> None:
    client, _ = gateway
    for examples in ("rain", [1], ["x"] * 33):
        response = client.post("/v1/tools/filter", json=_filter_body([{**TOOLS[0], "examples": examples}]))
        assert response.status_code == 400 and "examples" in response.json()["error"]


@pytest.mark.parametrize("gateway", [{}], indirect=True)
def test_with_feedback_off_the_door_says_so_and_nothing_is_kept(gateway: tuple[httpx.Client, GatewayMetrics]) -> None:
    client, metrics = gateway
    _, before = _ranked(client, TOOLS)
    response = client.post("/v1/tools/feedback", json={"query": PAST, "called": [TOOLS[0]]})
    assert response.status_code == 404 and "tool_feedback" in response.json()["error"]
    assert _ranked(client, TOOLS)[1] == before
    assert _feedback_count(metrics, "off") == 1


def test_the_feedback_vector_is_the_query_embedding_select_ranks_with() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        store = FeedbackVectors(None, max_vectors=4, ttl_s=60, capacity=100, lists=4, refresh_s=0)
        embeddings = ToolEmbeddings(backend, None, capacity=100, ttl_s=60)
        tool_filter = ToolFilter(embeddings, max_text_length=4096, max_tools=100, past_queries=PastQueryOptions(store, 0.5))
        messages = [{"role": "user", "content": "old"}, {"role": "user", "content": PAST}]
        assert await tool_filter.record_feedback({"messages": messages, "called": [TOOLS[0], TOOLS[0]]}) == (True, 1)
        assert backend.embed_calls[-1] == ("query", [PAST])  # the last user message, embedded as select embeds a query
        (tool_id,) = await embeddings.tool_ids(["weather forecast (weather__forecast). " + TOOLS[0]["description"]])
        found = await store.past([tool_id])
        assert found is not None and np.allclose(found[0], [bag_of_words_vector(PAST)])
        await embeddings.close()

    asyncio.run(scenario())


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_in_process_store_keeps_the_newest_vectors_up_to_the_cap_and_drops_them_after_the_ttl() -> None:
    async def scenario() -> None:
        clock = Clock()
        store = FeedbackVectors(None, max_vectors=3, ttl_s=100, capacity=10, lists=2, refresh_s=0, clock=clock)
        vectors = [np.eye(4, dtype=np.float32)[i % 4] * (i + 1) for i in range(5)]
        for vector in vectors:
            clock.now += 10
            assert await store.record(["a"], vector)
        found = await store.past(["b", "a"])
        assert found is not None
        assert found[1].tolist() == [1, 1, 1]  # three vectors, all the second tool's
        assert np.array_equal(found[0], np.vstack(vectors[:1:-1]))  # the newest three, newest first
        clock.now += 85  # kept at +30, +40, +50: now 105, 95 and 85 s old
        found = await store.past(["b", "a"])
        assert found is not None and len(found[1]) == 2
        clock.now += 100
        assert await store.past(["b", "a"]) is None  # all past the TTL
        assert "a" not in store._kept  # and let go

    asyncio.run(scenario())


def test_the_in_process_store_holds_at_most_its_capacity_of_tools() -> None:
    async def scenario() -> None:
        store = FeedbackVectors(None, max_vectors=2, ttl_s=100, capacity=3, lists=0, refresh_s=0)
        for name in "abcde":
            await store.record([name], np.ones(2, dtype=np.float32))
        assert list(store._kept) == ["c", "d", "e"]
        found = await store.past(list("abcde"))
        assert found is not None and found[1].tolist() == [2, 3, 4]

    asyncio.run(scenario())


def test_the_eval_split_gives_at_most_half_of_each_tools_one_tool_requests_as_feedback() -> None:
    from mcp_classifier.evaluation.tool_retrieval import RetrievalQuery, feedback_split

    queries = [
        *(RetrievalQuery(f"a{i}", ("a",)) for i in range(6)),
        *(RetrievalQuery(f"b{i}", ("b",)) for i in range(3)),
        RetrievalQuery("c0", ("c",)),
        RetrievalQuery("a and b", ("a", "b")),
    ]
    split = feedback_split(queries, 3)
    assert [q.query for q in split.past] == ["a0", "a1", "a2", "b0"]
    assert [q.query for q in split.held] == ["a3", "a4", "a5", "b1", "b2", "c0"]  # two-tool requests: neither
    assert split.tools == 2
