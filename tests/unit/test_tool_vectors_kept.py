"""Tool vectors paid for are kept: a list too big to embed within one request's deadline warms up instead of
failing open forever, and no tool is embedded twice at once. A slow fake backend stands in for the model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from mcp_classifier.backend.base import BackendUnavailable, EmbeddingKind
from mcp_classifier.cache.embeddings import ToolEmbeddingBacklogFull, ToolEmbeddings, ToolEmbeddingsPending
from mcp_classifier.toolfilter.tool_filter import ToolFilter
from tests.support.fake_backend import FakeBackend

SECONDS_PER_CALL = 0.05
CHUNK = 4
TOOLS = [{"name": f"tool_{i}", "description": f"does thing number {i} with widgets and gadgets {i}"} for i in range(40)]


class SlowBackend(FakeBackend):
    """Each embed call takes a while, as a model does on a busy host."""

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        await asyncio.sleep(SECONDS_PER_CALL)
        return await super().embed(texts, kind)


def _embeddings(backend: FakeBackend, *, deadline_s: float, capacity: int = 1000) -> ToolEmbeddings:
    return ToolEmbeddings(backend, None, capacity=capacity, ttl_s=60, query_timeout_s=deadline_s, document_chunk=CHUNK)


async def _until(predicate: Any, timeout_s: float = 30.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


def test_a_list_that_misses_the_deadline_fails_open_then_is_filtered_once_its_chunks_finish() -> None:
    async def scenario() -> None:
        backend = SlowBackend()
        embeddings = _embeddings(backend, deadline_s=2 * SECONDS_PER_CALL)  # 10 chunks need 5x that
        tool_filter = ToolFilter(embeddings, max_text_length=4096, max_tools=1000)
        first = await tool_filter.select("use widgets for thing number 7", TOOLS, top_k=3, threshold=0.0)
        assert not first.filtered and first.indices == list(range(len(TOOLS)))  # failed open: every tool kept
        assert "kept as they finish" in first.reason
        await _until(lambda: embeddings.health()["tool_embeddings_pending"] == 0)
        assert embeddings.health()["tool_embeddings_cached"] == len(TOOLS)
        document_calls = len([call for call in backend.embed_calls if call[0] == "document"])
        assert document_calls == len(TOOLS) // CHUNK  # each description embedded once, in chunks
        later = await tool_filter.select("use widgets for thing number 7", TOOLS, top_k=3, threshold=0.0)
        assert later.filtered and later.indices[0] == 7
        assert len([call for call in backend.embed_calls if call[0] == "document"]) == document_calls  # nothing embedded again
        await embeddings.close()

    asyncio.run(scenario())


def test_requests_for_tools_already_being_embedded_join_that_work() -> None:
    async def scenario() -> None:
        backend = SlowBackend()
        embeddings = _embeddings(backend, deadline_s=30.0)
        texts = [t["description"] for t in TOOLS[:12]]
        first, second = await asyncio.gather(embeddings.documents(texts), embeddings.documents(texts[4:] + ["a new tool"]))
        np.testing.assert_array_equal(first[4:], second[:-1])
        embedded = [text for kind, call in backend.embed_calls if kind == "document" for text in call]
        assert sorted(embedded) == sorted([*texts, "a new tool"])  # every text once
        await embeddings.close()

    asyncio.run(scenario())


def test_a_request_that_gives_up_leaves_its_chunks_to_finish() -> None:
    async def scenario() -> None:
        backend = SlowBackend()
        embeddings = _embeddings(backend, deadline_s=30.0)
        texts = [t["description"] for t in TOOLS[:16]]
        request = asyncio.ensure_future(embeddings.documents(texts))
        await asyncio.sleep(SECONDS_PER_CALL / 2)
        request.cancel()  # the caller hung up
        await _until(lambda: embeddings.health()["tool_embeddings_cached"] == len(texts))
        await embeddings.close()

    asyncio.run(scenario())


def test_more_than_the_cache_holds_is_refused_rather_than_queued() -> None:
    async def scenario() -> None:
        embeddings = _embeddings(SlowBackend(), deadline_s=SECONDS_PER_CALL, capacity=8)
        with pytest.raises(ToolEmbeddingBacklogFull, match="8 entries"):
            await embeddings.documents([t["description"] for t in TOOLS[:9]])
        assert embeddings.health()["tool_embeddings_pending"] == 0
        await embeddings.close()

    asyncio.run(scenario())


def test_a_failing_backend_fails_the_waiting_request_and_leaves_nothing_pending() -> None:
    async def scenario() -> None:
        backend = FakeBackend()
        backend.fail_with = BackendUnavailable("replicas are down")
        embeddings = _embeddings(backend, deadline_s=5.0)
        with pytest.raises(BackendUnavailable, match="replicas are down"):
            await embeddings.documents(["one tool", "another tool"])
        assert embeddings.health()["tool_embeddings_pending"] == 0
        backend.fail_with = None
        vectors = await embeddings.documents(["one tool", "another tool"])  # nothing stuck: the next try embeds
        assert vectors.shape[0] == 2
        await embeddings.close()

    asyncio.run(scenario())


def test_closing_mid_fill_fails_the_waiters_instead_of_leaving_them_hanging() -> None:
    async def scenario() -> None:
        embeddings = _embeddings(SlowBackend(), deadline_s=30.0)
        request = asyncio.ensure_future(embeddings.documents([t["description"] for t in TOOLS]))
        await asyncio.sleep(SECONDS_PER_CALL / 2)
        await embeddings.close()
        with pytest.raises(ToolEmbeddingsPending, match="closing"):
            await request

    asyncio.run(scenario())
