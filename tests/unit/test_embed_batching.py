"""Short embedding requests share model calls: one call per kind in a batch, rows back in each caller's order."""

from __future__ import annotations

import asyncio

import numpy as np

from mcp_classifier.backend.coalescer import BatchingOptions
from mcp_classifier.backend.embed_batching import SmallEmbeddingBatcher


def test_concurrent_requests_share_one_call_per_kind_and_get_their_own_rows() -> None:
    calls: list[tuple[str, list[str]]] = []

    async def embed_many(texts: list[str], kind: str) -> np.ndarray:
        calls.append((kind, texts))
        await asyncio.sleep(0.01)  # a model call: the next requests queue meanwhile
        return np.array([[float(len(t)), 1.0 if kind == "query" else 0.0] for t in texts], dtype=np.float32)

    texts = [f"text {'x' * i}" for i in range(24)]
    kinds = ["query" if i % 2 else "document" for i in range(len(texts))]

    async def run() -> list[np.ndarray]:
        batcher = SmallEmbeddingBatcher(embed_many, BatchingOptions(batch_size=8, batch_window_ms=5.0, max_queue=64), request_timeout_s=5)
        batcher.start()
        try:
            assert batcher.takes(texts[:8]) and not batcher.takes(texts[:9]) and not batcher.takes([])
            return await asyncio.gather(*(batcher.embed([t], k) for t, k in zip(texts, kinds)))  # type: ignore[arg-type]
        finally:
            await batcher.close()

    rows = asyncio.run(run())
    for text, kind, row in zip(texts, kinds, rows):
        assert row.shape == (1, 2) and row[0, 0] == len(text) and row[0, 1] == (kind == "query")
    assert len(calls) < len(texts) / 2, calls
    assert all(kinds[texts.index(t)] == kind for kind, batch in calls for t in batch)  # a call never mixes the kinds
    assert sorted(t for _, batch in calls for t in batch) == sorted(texts)
    assert all(len(batch) <= 8 for _, batch in calls)
