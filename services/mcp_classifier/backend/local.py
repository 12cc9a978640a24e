"""In-process backend: concurrent requests are coalesced into batches that run on one model thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from opentelemetry import context as otel_context

from ..core.classifier import ClassificationResult, Classifier, ClassifierInfo
from .base import BackendUnavailable
from .coalescer import RequestCoalescer


class LocalBatchingBackend:
    """Keeps the event loop free: the model runs on a dedicated thread, fed by a bounded queue."""

    def __init__(
        self,
        classifier_factory: Callable[[], Classifier],
        *,
        batch_size: int,
        batch_window_ms: float,
        max_queue: int,
        request_timeout_s: float,
    ) -> None:
        self._factory = classifier_factory
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="classifier")
        self._classifier: Classifier | None = None
        self._coalescer = RequestCoalescer(
            self._classify_on_thread,
            batch_size=batch_size,
            batch_window_ms=batch_window_ms,
            max_queue=max_queue,
            request_timeout_s=request_timeout_s,
        )

    @property
    def classifier(self) -> Classifier:
        if self._classifier is None:
            raise BackendUnavailable("the in-process classifier is not loaded yet")
        return self._classifier

    @property
    def batches_run(self) -> int:
        return self._coalescer.batches_run

    async def start(self) -> None:
        self._classifier = await asyncio.get_running_loop().run_in_executor(self._executor, self._factory)
        self._coalescer.start()

    async def close(self) -> None:
        await self._coalescer.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def ready(self) -> bool:
        return self._classifier is not None and self._coalescer.running

    async def info(self) -> ClassifierInfo:
        return self.classifier.info

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        if not texts:
            return []
        return await self._coalescer.submit(texts)

    async def run_in_worker(self, fn: Callable[[], object]) -> object:
        """Run fn on the model thread, between batches (used for hot reloads)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _classify_on_thread(self, texts: list[str], _: list[otel_context.Context]) -> list[ClassificationResult]:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.classifier.classify, texts)
