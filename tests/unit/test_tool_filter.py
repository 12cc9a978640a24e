"""select_tools and POST /v1/tools/filter on a fake backend: ranking, caching by content, fail-open, formats."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from mcp_classifier.backend.base import BackendUnavailable
from mcp_classifier.protocol.tool_filter import tool_text
from mcp_classifier.settings import Settings
from mcp_classifier.transports.http import create_app
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend, bag_of_words_vector

TOOLS = [
    {"name": "weather__forecast", "description": "Weather forecast for a city: rain, temperature, wind.", "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "description": "city name"}}}},
    {"name": "calendar__list_events", "description": "List calendar events and meetings for a day.", "inputSchema": {"type": "object", "properties": {"date": {"type": "string"}}}},
    {"name": "slack__post_message", "description": "Post a message to a Slack channel.", "inputSchema": {"type": "object", "properties": {"channel": {"type": "string", "description": "channel name"}, "text": {"type": "string"}}}},
    {"name": "jira__create_issue", "description": "Create a Jira issue in a project.", "inputSchema": {"type": "object", "properties": {"project": {"type": "string"}, "summary": {"type": "string"}}}},
]  # fmt: skip


def many_tools(n: int) -> list[dict[str, Any]]:
    return [{"name": f"server{i % 7}__tool_{i}", "description": f"Does thing number {i} for topic {i % 13}."} for i in range(n)]


@pytest.fixture()
def setup() -> Any:
    backend = FakeBackend()
    settings = Settings()
    tool_filter = build_tool_filter(settings, backend)
    app = create_app(
        build_dispatcher(settings, backend, tool_filter), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, tool_filter=tool_filter
    )
    with asgi_client(app) as client:
        yield client, backend


def select(client: httpx.Client, arguments: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/mcp/tools/call", json={"name": "select_tools", "arguments": arguments})
    assert response.status_code == 200, response.text
    return response.json()


def test_ranking_is_the_cosine_order_over_threshold_with_scores(setup: Any) -> None:
    client, _ = setup
    query = "will it rain in Oslo tomorrow, what is the forecast"
    result = select(client, {"query": query, "tools": TOOLS, "top_k": 2, "threshold": 0.0})["structuredContent"]
    q = bag_of_words_vector(query)
    expected = sorted(((float(bag_of_words_vector(tool_text(t, 8192)) @ q), t["name"]) for t in TOOLS), key=lambda x: -x[0])[:2]
    assert [t["name"] for t in result["tools"]] == [name for _, name in expected]
    assert [t["score"] for t in result["tools"]] == pytest.approx([s for s, _ in expected], abs=1e-6)
    assert result["tools"][0]["name"] == "weather__forecast" and result["filtered"] is True
    assert result["total"] == 4 and result["kept"] == 2
    strict = select(client, {"query": query, "tools": TOOLS, "threshold": 0.99})["structuredContent"]
    assert strict["tools"] == [] and strict["filtered"] is True  # nothing is similar enough


def test_a_list_seen_before_costs_one_query_embedding_and_a_changed_tool_only_itself(setup: Any) -> None:
    client, backend = setup
    tools = many_tools(200)
    select(client, {"query": "topic 5 please", "tools": tools})
    assert [kind for kind, _ in backend.embed_calls] == ["document", "query"]
    assert len(backend.embed_calls[0][1]) == 200  # every miss in one call
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


def test_tool_text_holds_name_description_and_parameters() -> None:
    text = tool_text(TOOLS[2], 8192)
    assert text.startswith("slack post message (slack__post_message). Post a message to a Slack channel.")
    assert "Parameters: channel: channel name; text" in text
    assert np.isclose(np.linalg.norm(bag_of_words_vector(text)), 1.0)
