"""classify_batch: one result per text in order, per-item errors, one backend call for the good texts."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.fake_backend import FakeBackend


def call(client: httpx.Client, arguments: Any) -> dict[str, Any]:
    response = client.post("/mcp/tools/call", json={"name": "classify_batch", "arguments": arguments})
    assert response.status_code == 200, response.text
    return response.json()


def test_classify_batch_is_listed_with_its_schemas(client: httpx.Client) -> None:
    tools = {t["name"]: t for t in client.post("/mcp/tools/list", json={}).json()["tools"]}
    batch = tools["classify_batch"]
    assert batch["inputSchema"]["properties"]["texts"]["maxItems"] == 256
    assert batch["inputSchema"]["required"] == ["texts"]
    assert set(batch["outputSchema"]["required"]) == {"results", "classified", "failed"}


def test_results_in_order_with_errors_for_bad_items_and_one_backend_call(client: httpx.Client, fake_backend: FakeBackend) -> None:
    texts: list[Any] = ["what is 2+2", "", "who was napoleon", 7, "x" * 9000, "why is the sky blue", "   "]
    calls_before = len(fake_backend.calls)
    result = call(client, {"texts": texts, "with_probabilities": True})
    assert result["isError"] is False
    payload = result["structuredContent"]
    assert payload["classified"] == 3 and payload["failed"] == 4
    assert fake_backend.calls[calls_before:] == [["what is 2+2", "who was napoleon", "why is the sky blue"]]
    results = payload["results"]
    assert len(results) == len(texts)
    for i, text in enumerate(texts):
        if i in (0, 2, 5):
            assert results[i] == fake_backend.answer(text).to_public(True)
            single = client.post("/mcp/tools/call", json={"name": "classify_text", "arguments": {"text": text, "with_probabilities": True}})
            assert single.json()["structuredContent"] == results[i]  # the same answer as classify_text
        else:
            assert results[i]["index"] == i and isinstance(results[i]["error"], str)
    assert "empty" in results[1]["error"] and "not a string" in results[3]["error"] and "longer than 8192" in results[4]["error"]


def test_without_probabilities_they_are_left_out(client: httpx.Client) -> None:
    results = call(client, {"texts": ["hello there", "integrate x squared"]})["structuredContent"]["results"]
    assert all("probabilities" not in r and "entropy" not in r and "class" in r for r in results)


def test_bad_calls_are_tool_errors(client: httpx.Client, fake_backend: FakeBackend) -> None:
    calls_before = len(fake_backend.calls)
    for arguments in ({"texts": []}, {"texts": "one text"}, {"texts": ["a"] * 257}, {}, {"texts": ["a"], "extra": 1}):
        result = call(client, arguments)
        assert result["isError"] is True, arguments
        assert result["content"][0]["type"] == "text"
    all_bad = call(client, {"texts": ["", "  "]})  # nothing to classify: no backend call at all
    assert all_bad["structuredContent"]["failed"] == 2
    assert len(fake_backend.calls) == calls_before
