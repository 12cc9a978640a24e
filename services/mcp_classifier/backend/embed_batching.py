"""Embedding requests of a few texts share model calls, as classifications do.

``/v1/embeddings`` from many clients (and a router's lone query) arrives one text per request; without this each
would be a model call of its own, where the classify path at the same load runs batches. A long list (a tool list)
is a batch already and goes straight to the model, so the tool filter's documents never wait in a queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
from opentelemetry import context as otel_context

from .base import EmbeddingKind
from .coalescer import BatchingOptions, RequestCoalescer

EmbedMany = Callable[[list[str], EmbeddingKind], Awaitable[np.ndarray]]


class SmallEmbeddingBatcher:
    """Gathers short embedding requests into one model call per kind (queries carry the instruction, documents not)."""

    def __init__(self, embed_many: EmbedMany, batching: BatchingOptions, *, request_timeout_s: float) -> None:
        self._embed_many = embed_many
        self.limit = batching.batch_size  # the most texts a request may bring and still be gathered
        self._coalescer: RequestCoalescer[tuple[EmbeddingKind, str], np.ndarray] = RequestCoalescer.from_options(
            self._run, batching, request_timeout_s=request_timeout_s, work="embedding"
        )

    def start(self) -> None:
        self._coalescer.start()

    async def close(self) -> None:
        await self._coalescer.close()

    def takes(self, texts: Sequence[str]) -> bool:
        """Whether a request is short enough to be gathered with others (else it is one model call of its own)."""
        return 0 < len(texts) <= self.limit

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        return np.stack(await self._coalescer.submit([(kind, text) for text in texts]))

    async def _run(self, asked: list[tuple[EmbeddingKind, str]], _: list[otel_context.Context]) -> list[np.ndarray]:
        rows: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(asked)
        for kind in dict.fromkeys(k for k, _ in asked):
            where = [i for i, (k, _) in enumerate(asked) if k == kind]
            vectors = await self._embed_many([asked[i][1] for i in where], kind)
            for i, vector in zip(where, vectors):
                rows[i] = vector
        return rows
