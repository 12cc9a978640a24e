"""Real MCP clients (PyPI mcp 2.x, fastmcp) over HTTP, and the mcp stdio client against `mcp-classifier stdio`."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import fastmcp
import httpx
import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support import assert_valid_classification
from tests.support.processes import ServerProcess


def _check_tools_and_calls(tool_names: list[str], classify_json: dict, categories_json: dict, n: int) -> None:
    assert {"list_categories", "classify_text"} <= set(tool_names)
    assert_valid_classification(classify_json, n)
    assert "probabilities" in classify_json and "entropy" in classify_json
    assert categories_json["categories"] == ["math", "science", "technology", "history", "general"]
    assert set(categories_json["category_system_prompts"]) == set(categories_json["categories"])


def test_mcp_sdk_client_over_http(server: ServerProcess, category_count: int) -> None:
    async def run() -> None:
        async with mcp.Client(f"{server.url}/mcp") as client:
            tools = await client.list_tools()
            classified = await client.call_tool(
                "classify_text", {"text": "What is the boiling point of water in kelvin?", "with_probabilities": True}
            )
            categories = await client.call_tool("list_categories", {})
        assert not classified.is_error
        classify_json = json.loads(classified.content[0].text)
        assert classified.structured_content == classify_json
        assert classify_json["category"] == "science"
        _check_tools_and_calls([t.name for t in tools.tools], classify_json, json.loads(categories.content[0].text), category_count)

    asyncio.run(run())


def _method_counts(url: str) -> dict[tuple[str, str, str], float]:
    """mcp_classifier_mcp_methods by (era, method, outcome), read from the gateway's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "mcp_classifier_mcp_methods_total":
                counts[(sample.labels["era"], sample.labels["method"], sample.labels["outcome"])] = sample.value
    return counts


def test_mcp_sdk_client_speaks_2026_07_28_without_initialize(server: ServerProcess) -> None:
    """mcp 2.x discovers the stateless revision and never sends the handshake: counted at the server."""
    before = _method_counts(server.url)

    async def run() -> None:
        async with mcp.Client(f"{server.url}/mcp") as client:
            await client.list_tools()
            classified = await client.call_tool("classify_text", {"text": "how do vaccines train the immune system"})
            assert not classified.is_error and classified.structured_content["category"] == "science"

    asyncio.run(run())
    after = _method_counts(server.url)
    grown = {key: after[key] - before.get(key, 0.0) for key in after if after[key] > before.get(key, 0.0)}
    assert grown.get(("2026-07-28", "server/discover", "ok"), 0) >= 1, grown
    assert grown.get(("2026-07-28", "tools/list", "ok"), 0) >= 1, grown
    assert grown.get(("2026-07-28", "tools/call", "ok"), 0) >= 1, grown
    assert not [key for key in grown if key[1] in ("initialize", "ping") or key[0] == "handshake"], grown


def test_fastmcp_client_over_http(server: ServerProcess, category_count: int) -> None:
    async def run() -> None:
        async with fastmcp.Client(f"{server.url}/mcp") as client:
            tools = await client.list_tools()
            classified = await client.call_tool(
                "classify_text", {"text": "How do I reverse a linked list in Java?", "with_probabilities": True}
            )
            categories = await client.call_tool("list_categories", {})
        classify_json = json.loads(classified.content[0].text)
        assert classify_json["category"] == "technology"
        _check_tools_and_calls([t.name for t in tools], classify_json, json.loads(categories.content[0].text), category_count)

    asyncio.run(run())


def test_mcp_sdk_stdio_client(category_count: int) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_classifier.cli", "stdio"], env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )

    async def run() -> None:
        async with stdio_client(params) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                classified = await session.call_tool(
                    "classify_text", {"text": "Who signed the Treaty of Versailles?", "with_probabilities": True}
                )
                categories = await session.call_tool("list_categories", {})
        classify_json = json.loads(classified.content[0].text)
        assert classify_json["category"] == "history"
        _check_tools_and_calls([t.name for t in tools.tools], classify_json, json.loads(categories.content[0].text), category_count)

    asyncio.run(asyncio.wait_for(run(), timeout=120))


def test_websocket_client_with_and_without_the_jsonrpc_field(server: ServerProcess, category_count: int) -> None:
    """The `websockets` client over loopback to the real gateway: tools/list and classify_text, both message styles."""
    from websockets.sync.client import connect

    url = server.url.replace("http://", "ws://") + "/ws"
    with connect(url, subprotocols=["mcp"], open_timeout=10) as socket:  # type: ignore[list-item]  # a plain str is a valid Subprotocol
        assert socket.subprotocol == "mcp"
        for with_field in (True, False):
            envelope = {"jsonrpc": "2.0"} if with_field else {}
            socket.send(json.dumps({**envelope, "id": 1, "method": "tools/list"}))
            listed = json.loads(socket.recv(timeout=30))
            assert ("jsonrpc" in listed) is with_field and "classify_text" in {t["name"] for t in listed["result"]["tools"]}
            call = {"name": "classify_text", "arguments": {"text": "What is the boiling point of water in kelvin?"}}
            socket.send(json.dumps({**envelope, "id": 2, "method": "tools/call", "params": call}))
            classified = json.loads(socket.recv(timeout=60))
            assert ("jsonrpc" in classified) is with_field and classified["id"] == 2
            assert_valid_classification(classified["result"]["structuredContent"], category_count)
            assert classified["result"]["structuredContent"]["category"] == "science"
