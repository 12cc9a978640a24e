"""Coalesces concurrent calls into batches, each run by one async batch function.

Hand-written because this is the product's own scheduling logic: the in-process backend feeds
its model thread with it, the gRPC backend turns many HTTP requests into one Classify call
(the replicas' @serve.batch then merges calls from all gateways), and the tool filter's query
embeddings ride one Embed call each round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from opentelemetry import context as otel_context

from .base import BackendError, BackendOverloaded, BackendTimeout, BackendUnavailable

log = logging.getLogger(__name__)

ResultT = TypeVar("ResultT")
# (texts, the OTel context of each caller) -> one result per text
BatchFunction = Callable[[list[str], list[otel_context.Context]], Awaitable[Sequence[ResultT]]]


@dataclass
class _Pending(Generic[ResultT]):
    texts: Sequence[str]
    context: otel_context.Context
    future: asyncio.Future[list[ResultT]] = field(repr=False)


class RequestCoalescer(Generic[ResultT]):
    def __init__(
        self,
        run_batch: BatchFunction[ResultT],
        *,
        batch_size: int,
        batch_window_ms: float,
        max_queue: int,
        request_timeout_s: float,
        max_concurrent_batches: int = 1,
        work: str = "classification",
    ) -> None:
        self._run_batch = run_batch
        self._work = work  # what the batches do, for error messages
        self._batch_size = batch_size
        self._window_s = batch_window_ms / 1000.0
        self._timeout_s = request_timeout_s
        self._max_queue = max_queue
        self._queue: asyncio.Queue[_Pending[ResultT]] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._max_concurrent = max_concurrent_batches
        self._worker: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self._last_batch_size = 0
        self._in_flight_texts = 0
        self.batches_run = 0

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._worker.done()

    def start(self) -> None:
        # Queue and semaphore are made here so they bind to the serving event loop.
        self._queue = asyncio.Queue(maxsize=self._max_queue)
        self._slots = asyncio.Semaphore(self._max_concurrent)
        self._worker = asyncio.create_task(self._run(), name="request-coalescer")

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        if self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
        while self._queue is not None and not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(BackendUnavailable("the server is shutting down"))

    async def submit(self, texts: Sequence[str]) -> list[ResultT]:
        if not self.running or self._queue is None:
            raise BackendUnavailable("the batcher is not running")
        future: asyncio.Future[list[ResultT]] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Pending(texts, otel_context.get_current(), future))
        except asyncio.QueueFull:
            raise BackendOverloaded(f"more than {self._max_queue} requests are waiting; retry later") from None
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._timeout_s)
        except TimeoutError:
            raise BackendTimeout(f"{self._work} took longer than {self._timeout_s:g} s") from None

    async def _gather_batch(self) -> list[_Pending[ResultT]]:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        count = len(batch[0].texts)
        limit = self._fair_share(count)
        # Wait for stragglers only when the server is busy (the last batch had company):
        # a lone client then pays no batching delay, a crowd gets fuller batches.
        deadline = loop.time() + (self._window_s if self._last_batch_size > 1 else 0.0)
        while count < limit:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            batch.append(item)
            count += len(item.texts)
        return batch

    def _fair_share(self, first_count: int) -> int:
        """Most texts the forming batch may take.

        With several batches in flight, a batch that grabs the whole queue leaves the other
        slots a text or two: they then run near-empty forwards while one long batch holds the
        crowd, and the imbalance feeds itself. Capping each batch at an even share of all
        outstanding work (queued + in flight) keeps the slots balanced. The queue counts
        requests, not texts: close enough, since nearly every request carries one text.
        """
        if self._max_concurrent == 1:
            return self._batch_size
        assert self._queue is not None
        outstanding = first_count + self._queue.qsize() + self._in_flight_texts
        return max(1, min(self._batch_size, -(-outstanding // self._max_concurrent)))

    async def _run(self) -> None:
        assert self._slots is not None
        while True:
            await self._slots.acquire()  # gather the next batch only when it can be sent
            batch = [p for p in await self._gather_batch() if not p.future.done()]  # timed-out callers are dropped
            if not batch:
                self._slots.release()
                continue
            self._last_batch_size = sum(len(p.texts) for p in batch)
            self._in_flight_texts += self._last_batch_size
            task = asyncio.create_task(self._execute(batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _execute(self, batch: list[_Pending[ResultT]]) -> None:
        assert self._slots is not None
        texts = [t for p in batch for t in p.texts]
        try:
            results = await self._run_batch(texts, [p.context for p in batch])
            if len(results) != len(texts):
                raise BackendError(f"backend returned {len(results)} results for {len(texts)} texts")
        except Exception as exc:
            error = exc if isinstance(exc, BackendError) else BackendError(f"{self._work} failed: {exc}")
            if not isinstance(exc, BackendError):
                log.exception("%s batch of %d texts failed", self._work, len(texts))
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(error)
            return
        finally:
            self._in_flight_texts -= len(texts)
            self._slots.release()
        self.batches_run += 1
        log.debug("batch of %d texts from %d requests", len(texts), len(batch))
        offset = 0
        for p in batch:
            n = len(p.texts)
            if not p.future.done():
                p.future.set_result(list(results[offset : offset + n]))
            offset += n
