"""select_tools and POST /v1/tools/filter on a fake backend: ranking, caching by content, fail-open, formats."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from mcp_classifier.backend.base import BackendUnavailable
from mcp_classifier.backend.coalescer import BatchingOptions
from mcp_classifier.backend.local import LocalBatchingBackend
from mcp_classifier.cache.embeddings import ToolEmbeddings
from mcp_classifier.settings import Settings
from mcp_classifier.toolfilter.tool_filter import default_threshold_for
from mcp_classifier.toolfilter.tool_ranking import tool_summary, tool_text
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend, bag_of_words_vector
from tests.support.http_app import tool_filter_app

TOOLS = [
    {"name": "weather__forecast", "description": "Weather forecast for a city: rain, temperature, wind.", "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "description": "city name"}}}},
    {"name": "calendar__list_events", "description": "List calendar events and meetings for a day.", "inputSchema": {"type": "object", "properties": {"date": {"type": "string"}}}},
    {"name": "slack__post_message", "description": "Post a message to a Slack channel.", "inputSchema": {"type": "object", "properties": {"channel": {"type": "string", "description": "channel name"}, "text": {"type": "string"}}}},
    {"name": "jira__create_issue", "description": "Create a Jira issue in a project.", "inputSchema": {"type": "object", "properties": {"project": {"type": "string"}, "summary": {"type": "string"}}}},
]  # fmt: skip


def many_tools(n: int) -> list[dict[str, Any]]:
    return [{"name": f"server{i % 7}__tool_{i}", "description": f"Does thing number {i} for topic {i % 13}."} for i in range(n)]


@pytest.fixture(params=["hybrid"])
def setup(request: pytest.FixtureRequest) -> Any:
    backend = FakeBackend()
    with asgi_client(tool_filter_app(Settings(tool_ranking=request.param), backend)) as client:
        yield client, backend


def select(client: httpx.Client, arguments: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/mcp/tools/call", json={"name": "select_tools", "arguments": arguments})
    assert response.status_code == 200, response.text
    return response.json()


def cosines(query: str, tools: list[dict[str, Any]]) -> np.ndarray:
    """What the fake encoder gives: bag-of-words cosine between the query and each tool's summary."""
    return np.array([float(bag_of_words_vector(tool_summary(t, 8192)) @ bag_of_words_vector(query)) for t in tools])


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in text.lower()).split()


@pytest.mark.parametrize("setup", ["embedding"], indirect=True)
def test_embedding_ranking_is_the_cosine_order_over_threshold_with_scores(setup: Any) -> None:
    client, _ = setup
    query = "will it rain in Oslo tomorrow, what is the forecast"
    result = select(client, {"query": query, "tools": TOOLS, "top_k": 2, "threshold": 0.0})["structuredContent"]
    scores = cosines(query, TOOLS)
    expected = sorted(range(len(TOOLS)), key=lambda i: -scores[i])[:2]
    assert [t["name"] for t in result["tools"]] == [TOOLS[i]["name"] for i in expected]
    assert [t["score"] for t in result["tools"]] == pytest.approx([scores[i] for i in expected], abs=1e-6)
    assert result["tools"][0]["name"] == "weather__forecast" and result["filtered"] is True
    assert result["total"] == 4 and result["kept"] == 2
    strict = select(client, {"query": query, "tools": TOOLS, "threshold": 0.99})["structuredContent"]
    assert strict["tools"] == [] and strict["filtered"] is True  # nothing is similar enough


def _fused(query: str, tools: list[dict[str, Any]], keyword_query: str | None = None) -> np.ndarray:
    """Independently: the cosine of the summaries and BM25 (rank-bm25) over the full texts, z-scored, 0.7/0.3."""
    scores = cosines(query, tools)
    lexical = np.asarray(BM25Okapi([words(tool_text(t, 8192)) for t in tools]).get_scores(words(keyword_query or query)))
    return 0.7 * (scores - scores.mean()) / scores.std() + 0.3 * (lexical - lexical.mean()) / lexical.std()


def test_hybrid_ranking_adds_bm25_over_the_full_text_to_the_cosine_as_z_scores(setup: Any) -> None:
    client, _ = setup
    tools = [*TOOLS, *many_tools(30)]
    query = "post the channel name with a summary about topic 3"  # one ask
    result = select(client, {"query": query, "tools": tools, "top_k": 8, "threshold": -1.0})["structuredContent"]
    scores, fused = cosines(query, tools), _fused(query, tools)
    expected = sorted(range(len(tools)), key=lambda i: (-fused[i], i))[:8]
    assert [t["name"] for t in result["tools"]] == [tools[i]["name"] for i in expected]
    assert [t["score"] for t in result["tools"]] == pytest.approx([scores[i] for i in expected], abs=1e-6)  # still the cosine
    assert expected != sorted(range(len(tools)), key=lambda i: (-scores[i], i))[:8]  # the words changed the order
    strict = select(client, {"query": query, "tools": tools, "top_k": 8, "threshold": 0.3})["structuredContent"]
    assert [t["name"] for t in strict["tools"]] == [tools[i]["name"] for i in expected if scores[i] >= 0.3]  # threshold on the cosine


def test_an_identifier_in_the_request_brings_its_parameter_words_to_bm25_only(setup: Any) -> None:
    client, backend = setup
    tools = [*TOOLS, *many_tools(30)]
    query = "let #ops know the build is green for the project"  # "#ops" is a channel, though no word says so
    result = select(client, {"query": query, "tools": tools, "top_k": 3, "threshold": -1.0})["structuredContent"]
    shaped, unshaped = _fused(query, tools, keyword_query=query + " channel"), _fused(query, tools)
    expected = sorted(range(len(tools)), key=lambda i: (-shaped[i], i))[:3]
    assert [t["name"] for t in result["tools"]] == [tools[i]["name"] for i in expected]
    assert expected != sorted(range(len(tools)), key=lambda i: (-unshaped[i], i))[:3]  # "channel" moved the slack tool up
    assert [texts for kind, texts in backend.embed_calls if kind == "query"] == [[query]]  # the encoder sees the request as written


def test_a_request_with_two_asks_interleaves_their_rankings_after_the_whole_requests_first_two(setup: Any) -> None:
    client, backend = setup
    tools = [*TOOLS, *many_tools(30)]
    query = "check the weather forecast for rain in Oslo and then post a message to the team channel"
    parts = [query, "check the weather forecast for rain in Oslo", "post a message to the team channel"]
    result = select(client, {"query": query, "tools": tools, "top_k": 6, "threshold": -1.0})["structuredContent"]
    orders = [sorted(range(len(tools)), key=lambda i, f=_fused(p, tools): (-f[i], i)) for p in parts]
    expected: list[int] = orders[0][:2]  # the whole request's first two, then round robin, each tool where it first appears
    for rank in range(len(tools)):
        for order in [*orders[1:], orders[0][2:]]:
            if rank < len(order) and order[rank] not in expected:
                expected.append(order[rank])
    best = np.max([cosines(p, tools) for p in parts], axis=0)
    assert [t["name"] for t in result["tools"]] == [tools[i]["name"] for i in expected[:6]]
    assert [t["score"] for t in result["tools"]] == pytest.approx([best[i] for i in expected[:6]], abs=1e-6)
    assert {"weather__forecast", "slack__post_message"} <= {t["name"] for t in result["tools"][:4]}
    assert [kind for kind, texts in backend.embed_calls if kind == "query"] == ["query"]  # the parts share one model call
    assert [texts for kind, texts in backend.embed_calls if kind == "query"][0] == parts


def test_a_list_seen_before_costs_one_query_embedding_and_a_changed_tool_only_itself(setup: Any) -> None:
    client, backend = setup
    tools = many_tools(200)
    select(client, {"query": "topic 5 please", "tools": tools})
    documents = [texts for kind, texts in backend.embed_calls if kind == "document"]
    assert [kind for kind, _ in backend.embed_calls][-1] == "query"
    embedded = [t for texts in documents for t in texts]
    assert len(embedded) == len(set(embedded)) == 200  # every miss once
    assert max(len(texts) for texts in documents) <= Settings().batching.batch_size  # every miss once, in chunks a batch wide
    backend.embed_calls.clear()
    select(client, {"query": "topic 6 now", "tools": tools})
    assert backend.embed_calls == [("query", ["topic 6 now"])]  # exactly one model call: the query
    backend.embed_calls.clear()
    changed = [*tools[:50], {**tools[50], "description": "A rewritten description."}, *tools[51:]]
    select(client, {"query": "topic 7", "tools": changed})
    assert [(kind, len(texts)) for kind, texts in backend.embed_calls] == [("document", 1), ("query", 1)]
    assert "rewritten" in backend.embed_calls[0][1][0]


def test_backend_down_fails_open_on_both_doors(setup: Any) -> None:
    client, backend = setup
    backend.fail_with = BackendUnavailable("embedder unreachable")
    result = select(client, {"query": "rain?", "tools": TOOLS})
    assert result["isError"] is False
    payload = result["structuredContent"]
    assert payload["filtered"] is False and [t["name"] for t in payload["tools"]] == [t["name"] for t in TOOLS]
    assert "embedder unreachable" in payload["reason"]
    response = client.post("/v1/tools/filter", json={"query": "rain?", "tools": TOOLS})
    assert response.status_code == 200 and response.json()["tools"] == TOOLS
    assert response.headers["x-tool-filter"] == "4->4" and response.headers["x-tool-filter-status"] == "unfiltered"


def test_filter_endpoint_returns_openai_tools_in_their_own_format_from_messages(setup: Any) -> None:
    client, _ = setup
    openai_tools = [
        {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["inputSchema"]}}
        for t in TOOLS
    ]
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "post hello to the slack channel general"},
        {"role": "assistant", "content": "Sure."},
        {"role": "user", "content": [{"type": "text", "text": "post a message to the slack channel general"}]},
    ]
    response = client.post("/v1/tools/filter", json={"messages": messages, "tools": openai_tools, "top_k": 1, "threshold": 0.1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["tools"] == [openai_tools[2]] and body["filtered"] is True and len(body["scores"]) == 1
    assert response.headers["x-tool-filter"] == "4->1" and response.headers["x-tool-filter-status"] == "filtered"


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"tools": TOOLS}, "query"),
        ({"query": "x", "tools": "nope"}, "tools"),
        ({"query": "x", "tools": [{"description": "no name"}]}, "name"),
        ({"query": "x", "tools": TOOLS, "top_k": 0}, "top_k"),
        ({"query": "x", "tools": TOOLS, "top_k": "5"}, "top_k"),
        ({"query": "x", "tools": TOOLS, "top_k": True}, "top_k"),
        ({"query": "x", "tools": TOOLS, "threshold": 2}, "threshold"),
        ({"query": "x", "tools": TOOLS, "threshold": "0.5"}, "threshold"),
        ({"query": 5, "tools": TOOLS}, "query"),
        ({"query": "x", "messages": "hi", "tools": TOOLS}, "messages"),
    ],
)
def test_bad_filter_requests_are_400_with_a_reason(setup: Any, body: dict[str, Any], fragment: str) -> None:
    client, _ = setup
    response = client.post("/v1/tools/filter", json=body)
    assert response.status_code == 400 and fragment in response.json()["error"]


def test_select_tools_bad_input_is_a_tool_error_and_too_many_tools_are_refused(setup: Any) -> None:
    client, backend = setup
    assert select(client, {"tools": TOOLS})["isError"] is True
    assert select(client, {"query": "x", "tools": many_tools(2001)})["isError"] is True
    assert backend.embed_calls == []


def test_tool_text_holds_name_description_and_parameters_and_the_summary_leaves_parameters_out() -> None:
    assert tool_summary(TOOLS[2], 8192) == "slack post message (slack__post_message). Post a message to a Slack channel."
    text = tool_text(TOOLS[2], 8192)
    assert text.startswith("slack post message (slack__post_message). Post a message to a Slack channel.")
    assert "Parameters: channel: channel name; text" in text
    assert np.isclose(np.linalg.norm(bag_of_words_vector(text)), 1.0)


class CountingModel:
    """The model behind a local backend: each embed call is one forward, which takes a moment; calls are counted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def start(self) -> None:
        return None

    async def embed(self, texts: list[str], kind: str) -> np.ndarray:
        self.calls.append((kind, list(texts)))
        await asyncio.sleep(0.02)
        return np.vstack([bag_of_words_vector(t) for t in texts])

    def close(self) -> None:
        return None


def test_concurrent_tool_filter_queries_each_get_their_own_vector_and_share_model_calls() -> None:
    """16 routers asking at once: each gets its own query's vector, and the local backend's embed batching
    gathers them into one or two forwards (the tool filter adds no queue of its own)."""
    queries = [f"query number {i} about topic {i % 5}" for i in range(16)]
    parts = ["find the ticket", "post it to ops"]

    async def scenario() -> tuple[CountingModel, list[np.ndarray], np.ndarray]:
        model = CountingModel()
        batching = BatchingOptions(batch_size=32, batch_window_ms=2.0, max_queue=64)
        backend = LocalBatchingBackend(model, batching=batching, request_timeout_s=5.0)  # type: ignore[arg-type]
        await backend.start()
        embeddings = ToolEmbeddings(backend, None, capacity=100, ttl_s=60)
        try:
            *singles, both = await asyncio.gather(*(embeddings.queries([q]) for q in queries), embeddings.queries(parts))
        finally:
            await embeddings.close()
            await backend.close()
        return model, [single[0] for single in singles], both

    model, vectors, both = asyncio.run(scenario())
    for query, vector in zip(queries, vectors):
        assert vector.shape == bag_of_words_vector(query).shape and np.allclose(vector, bag_of_words_vector(query)), query
    assert both.shape == (2, len(bag_of_words_vector(parts[0])))
    assert np.allclose(both, np.vstack([bag_of_words_vector(p) for p in parts]))
    assert all(kind == "query" for kind, _ in model.calls)
    assert sorted(t for _, call in model.calls for t in call) == sorted([*queries, *parts])
    assert len(model.calls) <= 2, model.calls  # one forward, or two when the first left before the rest arrived


def _gateway(settings: Settings) -> Any:
    return asgi_client(tool_filter_app(settings, FakeBackend()))


def _threshold_default(client: httpx.Client) -> float:
    listed = client.post("/mcp/tools/list", json={}).json()["tools"]
    return next(t for t in listed if t["name"] == "select_tools")["inputSchema"]["properties"]["threshold"]["default"]


def test_a_caller_without_a_threshold_gets_the_models_measured_default_on_both_doors() -> None:
    query = "post the forecast to the team channel"  # fake cosines: slack 0.29, weather 0.20, the others 0
    with _gateway(Settings()) as client:  # builtin:minilm: its cosines run low, its default is 0.1
        assert _threshold_default(client) == pytest.approx(0.1)
        names = [t["name"] for t in select(client, {"query": query, "tools": TOOLS})["structuredContent"]["tools"]]
        assert names == ["slack__post_message", "weather__forecast"]
        filtered = client.post("/v1/tools/filter", json={"query": query, "tools": TOOLS}).json()["tools"]
        assert [t["name"] for t in filtered] == names
        strict = select(client, {"query": query, "tools": TOOLS, "threshold": 0.3})["structuredContent"]
        assert strict["tools"] == []  # a caller's own threshold still rules
    with _gateway(Settings(tool_threshold=0.25)) as client:  # the operator's setting wins over the model's default
        assert _threshold_default(client) == pytest.approx(0.25)
        assert [t["name"] for t in select(client, {"query": query, "tools": TOOLS})["structuredContent"]["tools"]] == [
            "slack__post_message"
        ]


def test_models_without_a_measured_threshold_get_litellms_default() -> None:
    assert default_threshold_for("Qwen/Qwen3-Embedding-0.6B") == pytest.approx(0.3)
    assert default_threshold_for("builtin:minilm") < default_threshold_for("Qwen/Qwen3-Embedding-0.6B")


def test_select_tools_gives_each_kept_tool_a_confidence_and_counts_the_asks(setup: Any) -> None:
    client, _ = setup
    one = select(client, {"query": "will it rain in the city", "tools": TOOLS, "top_k": 4, "threshold": -1})["structuredContent"]
    assert one["needs"] == 1 and one["tools"][0]["name"] == "weather__forecast"
    confidences = [tool["confidence"] for tool in one["tools"]]
    assert len(confidences) == 4 and all(0 < c < 1 for c in confidences)
    assert confidences[0] == max(confidences)
    two = select(
        client,
        {"query": "create a jira issue for the outage and then post a message to the slack channel", "tools": TOOLS, "threshold": -1},
    )["structuredContent"]
    assert two["needs"] == 2


def test_the_filter_door_returns_confidences_beside_the_scores(setup: Any) -> None:
    client, _ = setup
    body = client.post("/v1/tools/filter", json={"query": "will it rain in the city", "tools": TOOLS, "top_k": 2, "threshold": -1}).json()
    assert body["needs"] == 1 and len(body["confidences"]) == len(body["scores"]) == 2
    assert body["confidences"][0] > body["confidences"][1]


@pytest.mark.parametrize("door", ["select_tools", "filter"])
def test_a_failed_open_answer_carries_no_confidence(setup: Any, door: str) -> None:
    client, backend = setup
    backend.fail_with = BackendUnavailable("embedder unreachable")
    if door == "select_tools":
        payload = select(client, {"query": "rain?", "tools": TOOLS})["structuredContent"]
        assert "needs" not in payload and all("confidence" not in tool for tool in payload["tools"])
    else:
        body = client.post("/v1/tools/filter", json={"query": "rain?", "tools": TOOLS}).json()
        assert "confidences" not in body and "needs" not in body
