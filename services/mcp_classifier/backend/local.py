"""In-process backend: concurrent requests are coalesced into batches that run on one worker thread."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..core.classifier import ClassificationResult, Classifier, ClassifierInfo
from .base import BackendError, BackendOverloaded, BackendTimeout, BackendUnavailable

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    texts: Sequence[str]
    future: asyncio.Future[list[ClassificationResult]] = field(repr=False)


class LocalBatchingBackend:
    """Keeps the event loop free: the model runs on a dedicated thread, fed by a bounded queue.

    Batching is hand-written rather than borrowed because it is the product's own scheduling
    logic (the Ray backend uses @serve.batch for the same job on the replicas).
    """

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
        self._batch_size = batch_size
        self._window_s = batch_window_ms / 1000.0
        self._timeout_s = request_timeout_s
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=max_queue)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="classifier")
        self._classifier: Classifier | None = None
        self._worker: asyncio.Task[None] | None = None
        self._last_batch_size = 0
        self.batches_run = 0
        self.texts_run = 0

    @property
    def classifier(self) -> Classifier:
        if self._classifier is None:
            raise BackendUnavailable("the in-process classifier is not loaded yet")
        return self._classifier

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._classifier = await loop.run_in_executor(self._executor, self._factory)
        self._worker = asyncio.create_task(self._run(), name="local-batcher")

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(BackendUnavailable("the server is shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def ready(self) -> bool:
        return self._classifier is not None and self._worker is not None and not self._worker.done()

    async def info(self) -> ClassifierInfo:
        return self.classifier.info

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        if not texts:
            return []
        if not await self.ready():
            raise BackendUnavailable("the in-process classifier is not running")
        future: asyncio.Future[list[ClassificationResult]] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Pending(texts, future))
        except asyncio.QueueFull:
            raise BackendOverloaded(f"more than {self._queue.maxsize} requests are waiting; retry later") from None
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
        except TimeoutError:
            raise BackendTimeout(f"classification took longer than {self._timeout_s:g} s") from None

    async def run_in_worker(self, fn: Callable[[], object]) -> object:
        """Run fn on the model thread, between batches (used for hot reloads)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _gather_batch(self) -> list[_Pending]:
        batch = [await self._queue.get()]
        count = len(batch[0].texts)
        # Wait for stragglers only when the server is busy (the last batch had company):
        # a lone client then pays no batching delay, a crowd gets fuller batches.
        deadline = asyncio.get_running_loop().time() + (self._window_s if self._last_batch_size > 1 else 0.0)
        while count < self._batch_size:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            batch.append(item)
            count += len(item.texts)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._gather_batch()
            live = [p for p in batch if not p.future.done()]  # callers that timed out are dropped
            if not live:
                continue
            texts = [t for p in live for t in p.texts]
            self._last_batch_size = len(texts)
            try:
                results = await loop.run_in_executor(self._executor, self.classifier.classify, texts)
            except Exception as exc:  # noqa: BLE001 - one bad batch must not kill the worker
                log.exception("classification batch of %d texts failed", len(texts))
                for p in live:
                    if not p.future.done():
                        p.future.set_exception(BackendError(f"classification failed: {exc}"))
                continue
            self.batches_run += 1
            self.texts_run += len(texts)
            offset = 0
            for p in live:
                n = len(p.texts)
                if not p.future.done():
                    p.future.set_result(results[offset : offset + n])
                offset += n
