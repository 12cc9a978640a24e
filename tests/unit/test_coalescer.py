"""Batch formation in the coalescer: whole queues for one slot, even shares for several, and a
crowd answered together regrouped into one batch.

The batch function here is an async stand-in for the model (it sleeps in proportion to its
batch): the coalescer's scheduling is the code under test, and it is the same whatever runs
the batches.
"""

from __future__ import annotations

import asyncio

import pytest

from mcp_classifier.backend.base import BackendUnavailable
from mcp_classifier.backend.coalescer import RequestCoalescer
from mcp_classifier.classify.results import ClassificationResult


def _result(text: str) -> ClassificationResult:
    return ClassificationResult(
        class_index=0, category=text, confidence=1.0, model="m", use_reasoning=False, probabilities=(1.0,), entropy=0.0
    )


async def _run(slots: int, requests: int, rounds: int = 1, regroup_wait: float = 0.0) -> list[tuple[int, int]]:
    """(batch size, batches running when it started) for every batch."""
    batches: list[tuple[int, int]] = []
    running = 0

    async def model_stand_in(texts: list[str], _contexts: list) -> list[ClassificationResult]:
        nonlocal running
        running += 1
        batches.append((len(texts), running))
        await asyncio.sleep(0.002 * len(texts))
        running -= 1
        return [_result(t) for t in texts]

    coalescer = RequestCoalescer(
        model_stand_in,
        batch_size=32,
        batch_window_ms=5.0,
        max_queue=1024,
        request_timeout_s=10.0,
        max_concurrent_batches=slots,
        regroup_wait=regroup_wait,
    )
    coalescer.start()

    async def client(k: int) -> None:
        for r in range(rounds):
            (answer,) = await coalescer.submit([f"text {k}/{r}"])
            assert answer.category == f"text {k}/{r}"  # every caller gets its own answer back

    try:
        await asyncio.gather(*(client(k) for k in range(requests)))
    finally:
        await coalescer.close()
    return batches


def test_one_slot_takes_the_whole_queue() -> None:
    batches = asyncio.run(_run(slots=1, requests=32))
    assert batches[0][0] == 32
    assert all(concurrent == 1 for _, concurrent in batches)


@pytest.mark.parametrize("regroup_wait", [0.0, 1.0])
def test_two_slots_split_a_crowd_evenly_and_run_side_by_side(regroup_wait: float) -> None:
    batches = asyncio.run(_run(slots=2, requests=32, regroup_wait=regroup_wait))
    assert [size for size, _ in batches[:2]] == [16, 16]  # not 32 and then nothing
    assert batches[1][1] == 2  # the second started while the first ran


@pytest.mark.parametrize("regroup_wait", [0.0, 1.0])
def test_two_slots_stay_balanced_under_closed_loop_load(regroup_wait: float) -> None:
    """Clients that resend at once: without even shares one slot takes the whole crowd every
    round and the other idles (or runs batches of 1-2), so the model threads never overlap.
    Regrouping is for one slot only: with two, the other batch keeps the model busy."""
    batches = asyncio.run(_run(slots=2, requests=32, rounds=8, regroup_wait=regroup_wait))
    overlapping = sum(1 for _, concurrent in batches if concurrent == 2)
    assert overlapping >= len(batches) // 2, batches
    sizes = [size for size, _ in batches]
    assert sum(sizes) / len(sizes) >= 8, sizes


async def _staggered_crowd(
    regroup_wait: float, *, clients: int, rounds: int, batch_s: float, per_text_s: float, stagger_s: float, lone_rounds: int = 0
) -> tuple[list[int], list[float]]:
    """Closed-loop clients answered in one batch come back one after another (client k after k x
    ``stagger_s``), as a server writes a crowd's answers in turn and reads their next requests.
    Then client 0 goes on alone for ``lone_rounds``. Returns every batch's size, and the lone
    requests' latencies."""
    sizes: list[int] = []
    lone_latencies: list[float] = []

    async def model_stand_in(texts: list[str], _contexts: list) -> list[ClassificationResult]:
        sizes.append(len(texts))
        await asyncio.sleep(batch_s + per_text_s * len(texts))
        return [_result(t) for t in texts]

    coalescer = RequestCoalescer(
        model_stand_in, batch_size=32, batch_window_ms=0.0, max_queue=1024, request_timeout_s=10.0, regroup_wait=regroup_wait
    )
    coalescer.start()
    loop = asyncio.get_running_loop()

    async def client(k: int) -> None:
        for r in range(rounds):
            await coalescer.submit([f"text {k}/{r}"])
            await asyncio.sleep(stagger_s * k)

    try:
        await asyncio.gather(*(client(k) for k in range(clients)))
        for r in range(lone_rounds):
            started = loop.time()
            await coalescer.submit([f"lone {r}"])
            lone_latencies.append(loop.time() - started)
    finally:
        await coalescer.close()
    return sizes, lone_latencies


def test_one_slot_regroups_a_crowd_answered_together() -> None:
    """Without regrouping, the first caller back starts a batch alone and the rest queue behind
    it: the batches split the crowd from then on. With it, every round is one batch of all 32."""
    # The crowd comes back over 31 x 0.3 = 9.3 ms; a regroup wait of half a 68 ms batch leaves it 25 ms to spare.
    crowd = {"clients": 32, "rounds": 6, "batch_s": 0.004, "per_text_s": 0.002, "stagger_s": 0.0003}
    split, _ = asyncio.run(_staggered_crowd(0.0, **crowd))
    regrouped, _ = asyncio.run(_staggered_crowd(0.5, **crowd))
    assert min(split) < 16, split  # the scenario does split a crowd when nothing regroups it
    assert regrouped == [32] * 6, regrouped


def test_a_lone_caller_never_waits_and_the_crowd_figure_follows_callers_who_leave() -> None:
    """After a crowd, the one caller left pays at most one bounded wait for the others; then the
    crowd is one, and no request waits: each takes about one batch (0.1 s), not two."""
    sizes, lone = asyncio.run(_staggered_crowd(1.0, clients=32, rounds=2, batch_s=0.1, per_text_s=0.001, stagger_s=0.0, lone_rounds=5))
    assert sizes[:2] == [32, 32]
    assert lone[0] < 0.1 + 0.132 + 0.1  # a lone batch, at most one wait of the last batch's time, slack
    assert all(latency < 0.17 for latency in lone[1:]), lone  # a wait would make it 0.2 s or more


def test_close_ends_the_worker_even_when_its_cancel_lands_as_a_straggler_arrives() -> None:
    """close() cancels the worker and waits for it. Python 3.11's wait_for, which the straggler wait
    used, returned a text that arrived just as the cancel landed and swallowed the cancel: the worker
    ran on and close() waited forever (the same race hung a CI run in the gRPC follower)."""

    async def scenario() -> None:
        async def model_stand_in(texts: list[str], _contexts: list) -> list[ClassificationResult]:
            return [_result(t) for t in texts]

        coalescer = RequestCoalescer(
            model_stand_in, batch_size=32, batch_window_ms=1000.0, max_queue=16, request_timeout_s=2.0, max_concurrent_batches=1
        )
        coalescer.start()
        await asyncio.gather(*(coalescer.submit([f"crowd {k}"]) for k in range(4)))  # a batch of several: stragglers are waited for
        first = asyncio.create_task(coalescer.submit(["first"]))
        while coalescer._queue is not None and coalescer._queue.qsize():  # the worker takes it and waits for stragglers
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        # In one turn of the loop: a straggler arrives, then close() cancels the worker.
        straggler = asyncio.create_task(coalescer.submit(["straggler"]))
        closing = asyncio.create_task(coalescer.close())
        async with asyncio.timeout(5):
            await closing
        assert not coalescer.running
        # The texts the worker held when it stopped fail at once, with a clear error (not the request timeout, 2 s).
        for caller in (first, straggler):
            async with asyncio.timeout(0.5):
                with pytest.raises(BackendUnavailable, match="shutting down"):
                    await caller

    asyncio.run(scenario())


def test_callers_that_time_out_on_a_stalled_backend_are_dropped_and_leave_no_unretrieved_error() -> None:
    """A backend that stalls past the deadline: every caller gets BackendTimeout at the deadline. Those still
    queued are not sent once the backend is free, and the stalled batch's late failure is handed to no one.
    A gateway in front of a stalled replica used to log "Future exception was never retrieved", with its
    traceback, once for every request that timed out."""
    import gc

    from mcp_classifier.backend.base import BackendError, BackendTimeout

    unhandled: list[dict] = []
    sent: list[int] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unhandled.append(context))
        release = asyncio.Event()

        async def stalled_backend(texts: list[str], _contexts: list) -> list[ClassificationResult]:
            sent.append(len(texts))
            await release.wait()
            raise BackendError("the embedder gave up")

        coalescer = RequestCoalescer(
            stalled_backend, batch_size=2, batch_window_ms=0.0, max_queue=64, request_timeout_s=0.2, max_concurrent_batches=1
        )
        coalescer.start()
        try:
            outcomes = await asyncio.gather(*(coalescer.submit([f"text {k}"]) for k in range(6)), return_exceptions=True)
            assert all(isinstance(outcome, BackendTimeout) for outcome in outcomes), outcomes
            release.set()  # the stalled batch fails now, after its callers left
            await asyncio.sleep(0.2)
        finally:
            await coalescer.close()

    asyncio.run(scenario())
    gc.collect()  # an exception nobody retrieved is reported when its future is collected
    assert sent == [2], sent  # only the batch already running was sent; the timed-out callers behind it were dropped
    assert unhandled == [], [context.get("message") for context in unhandled]
