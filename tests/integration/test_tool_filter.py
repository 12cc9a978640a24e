"""The semantic tool filter on the real model and a real Redis, in process.

Its embedding ranking equals a brute-force cosine ranking computed here with the same encoder; a tool list
seen before costs one model call (the query), also for a second gateway that shares the Redis.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from mcp_classifier.backend.base import EmbeddingKind
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.redis_io.redis_link import RedisLink
from mcp_classifier.settings import Settings
from mcp_classifier.toolfilter.tool_ranking import tool_summary
from mcp_classifier.wiring import build_dispatcher, build_local_backend, build_tool_filter
from tests.support.redis_server import RedisServer

SERVERS = ["github", "jira", "slack", "gmail", "drive", "calendar", "weather", "postgres"]
ACTIONS = ["search", "get", "create", "update", "delete", "list", "comment on", "share", "archive", "export"]
OBJECTS = ["issue", "pull request", "message", "email", "file", "event", "forecast", "table", "channel", "folder"]


def tool_list(n: int) -> list[dict[str, Any]]:
    tools = []
    for i in range(n):
        server, action, obj = SERVERS[i % 8], ACTIONS[(i // 8) % 10], OBJECTS[(i // 80 + i) % 10]
        tools.append({
            "name": f"{server}__{action.replace(' ', '_')}_{obj.replace(' ', '_')}_{i}",
            "description": f"{action.capitalize()} a {obj} in {server}.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": f"the {obj} id"}}},
        })  # fmt: skip
    return tools


class CountingEmbeds:
    """The real backend, counting its embed calls by kind."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embeds: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        self.embeds.append((kind, len(texts)))
        return await self.inner.embed(texts, kind)


async def _call(dispatcher: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await dispatcher.call("tools/call", {"name": "select_tools", "arguments": arguments})
    assert result["isError"] is False, result
    return result["structuredContent"]


def test_selection_equals_brute_force_cosine_and_lists_are_cached_across_gateways(tmp_path: Any) -> None:
    redis = RedisServer(tmp_path).start()
    try:
        asyncio.run(_scenario(redis))
    finally:
        redis.stop()


async def _scenario(redis: RedisServer) -> None:
    settings = Settings(backend="local", tool_ranking="embedding")  # the pure cosine order; unit tests pin the hybrid one
    backend = CountingEmbeds(build_local_backend(settings))
    links = [
        RedisLink(redis.url, timeout_s=1, connect_timeout_s=1, failure_threshold=3, cooldown_s=1, metrics=RedisMetrics(CollectorRegistry()))
        for _ in range(2)
    ]
    # two "gateways": separate tool filters (separate in-process LRUs) sharing one Redis and one model
    gateways = [build_dispatcher(settings, backend, build_tool_filter(settings, backend, link)) for link in links]
    await backend.start()
    for link in links:
        await link.start()
    tools = tool_list(200)
    query = "open a new bug report in jira about the login page"
    try:
        first = await _call(gateways[0], {"query": query, "tools": tools, "top_k": 10, "threshold": 0.0})
        documents = [count for kind, count in backend.embeds if kind == "document"]
        assert sum(documents) == 200 and max(documents) <= settings.batching.batch_size  # every tool once, in batch-wide chunks
        assert backend.embeds[-1] == ("query", 1)  # then the query

        # brute force, independently: another encoder of the service's model, batching and arithmetic (its small
        # calls take fp16 weights, fp16_weights_max_tokens), every tool text and the query, cosine, sorted
        service = backend.inner.worker.classifier.encoder
        encoder = TextEncoder.load(
            "builtin:minilm",
            device="cpu",
            max_seq_length=settings.model.max_seq_length,
            options=EngineOptions(
                batch_size=settings.batching.batch_size,
                pack_width=settings.engine.pack_width_tokens,
                forward_overhead_tokens=service.forward_overhead_tokens,
                fp16_weights_max_tokens=settings.engine.fp16_weights_max_tokens,
            ),
        )
        # In the service's own chunks: a chunk's sub-batches (and which of them take fp16 weights) follow its size.
        summaries = [tool_summary(t, settings.serving.max_text_length) for t in tools]
        chunk = settings.batching.batch_size
        documents = np.vstack([encoder.encode_documents(summaries[i : i + chunk]) for i in range(0, len(summaries), chunk)])
        scores = documents @ encoder.encode_queries([query])[0]
        expected = sorted(range(200), key=lambda i: (-scores[i], i))[:10]
        # Same order, same scores. Two encoder instances may plan their sub-batches differently, which moves
        # a float32 cosine by ~1e-7: a swap is accepted only between tools whose scores are that close.
        index_of = {t["name"]: i for i, t in enumerate(tools)}
        for position, picked in enumerate(first["tools"]):
            want = expected[position]
            assert picked["name"] == tools[want]["name"] or abs(scores[index_of[picked["name"]]] - scores[want]) < 1e-5
            assert abs(picked["score"] - float(scores[want])) < 1e-5

        backend.embeds.clear()
        await _call(gateways[0], {"query": "what's the weather tomorrow", "tools": tools})
        assert backend.embeds == [("query", 1)]  # the same list again: one model call, for the query

        await asyncio.sleep(0.3)  # the first gateway's write-behind reaches Redis
        backend.embeds.clear()
        await _call(gateways[1], {"query": "share the budget file", "tools": tools})
        assert backend.embeds == [("query", 1)]  # the other gateway finds the vectors in Redis

        backend.embeds.clear()
        changed = [{**t, "description": t["description"] + " Now with labels."} if i == 7 else t for i, t in enumerate(tools)]
        await _call(gateways[1], {"query": "share the budget file", "tools": changed})
        assert backend.embeds == [("document", 1), ("query", 1)]  # one changed tool: its embedding and the query
    finally:
        for link in links:
            await link.close()
        await backend.close()


def test_a_list_too_big_for_the_deadline_fails_open_then_is_filtered_and_fast_once_warm() -> None:
    """The real model: the first call's deadline is shorter than embedding the list, so it fails open; the chunks
    it started finish in the background, and a later call is filtered, from the kept vectors alone."""
    asyncio.run(_warms_up())


async def _warms_up() -> None:
    from mcp_classifier.cache.embeddings import ToolEmbeddings
    from mcp_classifier.toolfilter.tool_filter import ToolFilter

    settings = Settings(backend="local")
    backend = CountingEmbeds(build_local_backend(settings))
    await backend.start()
    tools = tool_list(300)
    embeddings = ToolEmbeddings(backend, None, capacity=1000, ttl_s=60, query_timeout_s=30.0, document_chunk=settings.batching.batch_size)
    embeddings.deadline_s = 0.05  # for the tools' vectors only: the first call cannot have them in time
    tool_filter = ToolFilter(embeddings, max_text_length=settings.serving.max_text_length, max_tools=settings.toolfilter.max_tools)
    query = "open a new bug report in jira about the login page"
    try:
        cold = await tool_filter.select(query, tools, top_k=5, threshold=0.0)
        assert not cold.filtered and cold.indices == list(range(300)), "a cold list of 300 embedded within 50 ms?"
        deadline = asyncio.get_running_loop().time() + 600  # a slow host's chunks: generous, never judged
        while embeddings.health()["tool_embeddings_pending"] and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        assert embeddings.health()["tool_embeddings_cached"] == 300
        backend.embeds.clear()
        warm = await tool_filter.select(query, tools, top_k=5, threshold=0.0)
        assert warm.filtered and len(warm.indices) == 5
        assert backend.embeds and all(kind == "query" for kind, _ in backend.embeds)  # no tool embedded again
    finally:
        await embeddings.close()
        await backend.close()
