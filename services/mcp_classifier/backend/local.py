"""In-process backend: concurrent requests are coalesced into batches for one model worker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from opentelemetry import context as otel_context

from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult
from .base import BackendHealth, BackendTimeout, BackendUnavailable, EmbeddingKind
from .coalescer import BatchingOptions, RequestCoalescer
from .embed_batching import SmallEmbeddingBatcher
from .model_worker import ModelWorker

NOT_LOADED = "the in-process classifier is not loaded yet"


class LocalBatchingBackend:
    """Keeps the event loop free: the model runs on its own worker, fed by a bounded queue.

    Every classifier of the process shares the one queue: a batch carries (classifier, text) pairs, and the worker's
    registry embeds each text once for all the classifiers that asked about it with the same query prompt."""

    def __init__(
        self,
        worker: ModelWorker,
        *,
        batching: BatchingOptions,
        request_timeout_s: float,
    ) -> None:
        self.worker = worker
        self._timeout_s = request_timeout_s
        self._started = False
        self._coalescer = RequestCoalescer.from_options(self._predict_batch, batching, request_timeout_s=request_timeout_s)
        self._small_embeddings = SmallEmbeddingBatcher(self._embed_whole, batching, request_timeout_s=request_timeout_s)

    @property
    def batches_run(self) -> int:
        return self._coalescer.batches_run

    @property
    def batching(self) -> RequestCoalescer[tuple[str, str], ClassificationResult]:
        """The batcher in front of the model: its queue depth and batch sizes are exported at scrape time."""
        return self._coalescer

    async def start(self) -> None:
        await self.worker.start()
        self._started = True
        self._coalescer.start()
        self._small_embeddings.start()

    async def close(self) -> None:
        await self._coalescer.close()
        await self._small_embeddings.close()
        self.worker.close()

    async def reload_categories(self) -> bool:
        """Reloadable: the worker's registry re-reads the categories file (file watch, SIGHUP); True when a new version went live."""
        return await self.worker.reload_categories()

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        """Cheap either way: the info is the loaded classifiers' own, in this process."""
        if not self._started:
            return BackendHealth(ready=False, detail=NOT_LOADED)
        infos = await self.worker.infos()
        return BackendHealth(ready=self._coalescer.running, info=infos[DEFAULT], classifiers=infos)

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        """Unit vectors, bounded by the request timeout: a few texts join other callers' in one model call
        (embed_batching), a long list is one model call of its own."""
        if not self._started:
            raise BackendUnavailable(NOT_LOADED)
        if self._small_embeddings.takes(texts):
            return await self._small_embeddings.embed(texts, kind)
        return await self._embed_whole(list(texts), kind)

    async def _embed_whole(self, texts: list[str], kind: EmbeddingKind) -> np.ndarray:
        try:
            return await asyncio.wait_for(self.worker.embed(texts, kind), self._timeout_s)
        except TimeoutError:
            raise BackendTimeout(f"embedding {len(texts)} texts took longer than {self._timeout_s:g} s") from None

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        if classifier != DEFAULT and self._started and classifier not in self.worker.names:
            raise UnknownClassifier(classifier, self.worker.names)
        if not texts:
            return []
        return await self._coalescer.submit([(classifier, text) for text in texts])

    async def _predict_batch(self, asked: list[tuple[str, str]], _: list[otel_context.Context]) -> list[ClassificationResult]:
        return await self.worker.classify(asked)
