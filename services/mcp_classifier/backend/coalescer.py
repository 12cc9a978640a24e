"""Coalesces concurrent calls into batches, each run by one async batch function.

Hand-written because this is the product's own scheduling logic: the in-process backend feeds
its model thread with it, the gRPC backend turns many HTTP requests into one Classify call
(the replicas' @serve.batch then merges calls from all gateways), and the tool filter's query
embeddings ride one Embed call each round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from opentelemetry import context as otel_context

from ..util.batch_sizes import BatchSizes
from .base import BackendError, BackendOverloaded, BackendTimeout, BackendUnavailable

if TYPE_CHECKING:
    from ..settings import BatchingSettings

log = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")  # what one request asks about each of its texts: the text, or the text and its classifier
ResultT = TypeVar("ResultT")
# (items, the OTel context of each caller) -> one result per item
BatchFunction = Callable[[list[ItemT], list[otel_context.Context]], Awaitable[Sequence[ResultT]]]


@dataclass(frozen=True)
class BatchingOptions:
    """How the gateway gathers requests into model calls: one object for every backend that batches, built once
    from the settings, so the knobs are named in one place."""

    batch_size: int
    batch_window_ms: float
    max_queue: int
    batch_regroup_wait: float = 0.0
    max_concurrent_batches: int = 1

    @classmethod
    def from_settings(cls, batching: BatchingSettings) -> BatchingOptions:
        return cls(
            batch_size=batching.batch_size,
            batch_window_ms=batching.batch_window_ms,
            max_queue=batching.max_queue,
            batch_regroup_wait=batching.batch_regroup_wait,
            max_concurrent_batches=batching.max_concurrent_batches,
        )


@dataclass
class _Pending(Generic[ItemT, ResultT]):
    texts: Sequence[ItemT]
    context: otel_context.Context
    future: asyncio.Future[list[ResultT]] = field(repr=False)


class RequestCoalescer(Generic[ItemT, ResultT]):
    def __init__(
        self,
        run_batch: BatchFunction[ItemT, ResultT],
        *,
        batch_size: int,
        batch_window_ms: float,
        max_queue: int,
        request_timeout_s: float,
        max_concurrent_batches: int = 1,
        regroup_wait: float = 0.0,
        work: str = "classification",
    ) -> None:
        self._run_batch = run_batch
        self._work = work  # what the batches do, for error messages
        self._batch_size = batch_size
        self._window_s = batch_window_ms / 1000.0
        self._regroup_wait = regroup_wait  # a fraction of the last batch's time (see _wait_plan)
        self._timeout_s = request_timeout_s
        self._max_queue = max_queue
        self._queue: asyncio.Queue[_Pending[ItemT, ResultT]] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._max_concurrent = max_concurrent_batches
        self._worker: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self._last_batch_size = 0
        self._last_batch_s = 0.0
        self._crowd = 0  # texts in the server (running or queued) as the last batch ended
        self._in_flight_texts = 0
        self._forming: list[_Pending[ItemT, ResultT]] = []  # taken from the queue, not yet sent: close() fails them too
        self.batches_run = 0
        self.batch_sizes = BatchSizes()  # every batch sent, read by the metrics exporter at scrape time

    @classmethod
    def from_options(
        cls,
        run_batch: BatchFunction[ItemT, ResultT],
        options: BatchingOptions,
        *,
        request_timeout_s: float,
        work: str = "classification",
    ) -> RequestCoalescer[ItemT, ResultT]:
        """The coalescer a backend puts in front of its model calls."""
        return cls(
            run_batch,
            batch_size=options.batch_size,
            batch_window_ms=options.batch_window_ms,
            max_queue=options.max_queue,
            request_timeout_s=request_timeout_s,
            max_concurrent_batches=options.max_concurrent_batches,
            regroup_wait=options.batch_regroup_wait,
            work=work,
        )

    @property
    def queue_depth(self) -> int:
        """Requests waiting for a batch: queued, or taken into the batch that is forming."""
        queued = self._queue.qsize() if self._queue is not None else 0
        return queued + len(self._forming)

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
        unsent, self._forming = self._forming, []
        while self._queue is not None and not self._queue.empty():
            unsent.append(self._queue.get_nowait())
        for pending in unsent:
            if not pending.future.done():
                pending.future.set_exception(BackendUnavailable("the server is shutting down"))

    async def submit(self, texts: Sequence[ItemT]) -> list[ResultT]:
        if not self.running or self._queue is None:
            raise BackendUnavailable("the batcher is not running")
        future: asyncio.Future[list[ResultT]] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Pending(texts, otel_context.get_current(), future))
        except asyncio.QueueFull:
            raise BackendOverloaded(f"more than {self._max_queue} requests are waiting; retry later") from None
        try:
            # Not shielded: a caller that times out or goes away cancels its future, so a batch not yet formed
            # drops it and one already running has no one to hand a late error to (an unretrieved exception,
            # logged with its traceback once per caller an overloaded backend let down).
            return await asyncio.wait_for(future, self._timeout_s)
        except TimeoutError:
            raise BackendTimeout(f"{self._work} took longer than {self._timeout_s:g} s") from None

    async def _gather_batch(self) -> list[_Pending[ItemT, ResultT]]:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        batch = self._forming = [await self._queue.get()]
        count = len(batch[0].texts)
        limit = self._fair_share(count)
        while count < limit:  # what is queued already
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            batch.append(item)
            count += len(item.texts)
        target, wait_s = self._wait_plan(count, limit)
        deadline = loop.time() + wait_s
        while count < target:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel (close()) that lands as
                # a text arrives, and this loop would then run on with close() waiting for it.
                async with asyncio.timeout(remaining):
                    item = await self._queue.get()
            except TimeoutError:
                break
            batch.append(item)
            count += len(item.texts)
        return batch

    def _wait_plan(self, count: int, limit: int) -> tuple[int, float]:
        """How many texts the forming batch waits for, and for how long at most.

        Stragglers are waited for only while the server is busy (the last batch had company), for
        ``batch_window_ms``: a lone client then pays no batching delay.

        A crowd answered together comes back together. With one batch in flight at a time, a batch
        started on the one request already queued runs beside the others' turnaround (their answers
        written, their next requests read), three times slower than alone, and they queue behind it:
        at 32 closed-loop clients the local backend's batches settled into 1 and 31 texts (debug log,
        2026-11-27). So when fewer than half of the texts that were in the server as the last batch
        ended are queued, the batch waits for that many, up to ``regroup_wait`` times the last
        batch's time. The figure follows the load: when callers leave, one bounded wait later the
        smaller crowd is the new figure. With several batches in flight the others keep the model
        busy and a crowd splits across them; waiting there idled a replica (Ray at 32 clients: 249
        and 302 req/s against 308 and 331 without), so the rule is for one batch at a time.
        """
        window = self._window_s if self._last_batch_size > 1 else 0.0
        crowd = min(limit, self._crowd)
        if self._regroup_wait > 0 and self._max_concurrent == 1 and count * 2 < crowd:
            return crowd, max(window, self._regroup_wait * self._last_batch_s)
        return limit, window

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
            self._forming = []
            if not batch:
                self._slots.release()
                continue
            self._last_batch_size = sum(len(p.texts) for p in batch)
            self.batch_sizes.observe(self._last_batch_size)
            self._in_flight_texts += self._last_batch_size
            task = asyncio.create_task(self._execute(batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _execute(self, batch: list[_Pending[ItemT, ResultT]]) -> None:
        assert self._slots is not None
        texts = [t for p in batch for t in p.texts]
        started = time.perf_counter()
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
            assert self._queue is not None
            self._last_batch_s = time.perf_counter() - started
            self._crowd = self._in_flight_texts + self._queue.qsize()  # queued requests, nearly all of one text
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
