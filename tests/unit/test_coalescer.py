"""Batch formation in the coalescer: whole queues for one slot, even shares for several.

The batch function here is an async stand-in for the model (it sleeps in proportion to its
batch): the coalescer's scheduling is the code under test, and it is the same whatever runs
the batches.
"""

from __future__ import annotations

import asyncio

from mcp_classifier.backend.coalescer import RequestCoalescer
from mcp_classifier.core.results import ClassificationResult


def _result(text: str) -> ClassificationResult:
    return ClassificationResult(
        class_index=0, category=text, confidence=1.0, model="m", use_reasoning=False, probabilities=(1.0,), entropy=0.0
    )


async def _run(slots: int, requests: int, rounds: int = 1) -> list[tuple[int, int]]:
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
        model_stand_in, batch_size=32, batch_window_ms=5.0, max_queue=1024, request_timeout_s=10.0, max_concurrent_batches=slots
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


def test_two_slots_split_a_crowd_evenly_and_run_side_by_side() -> None:
    batches = asyncio.run(_run(slots=2, requests=32))
    assert [size for size, _ in batches[:2]] == [16, 16]  # not 32 and then nothing
    assert batches[1][1] == 2  # the second started while the first ran


def test_two_slots_stay_balanced_under_closed_loop_load() -> None:
    """Clients that resend at once: without even shares one slot takes the whole crowd every
    round and the other idles (or runs batches of 1-2), so the model threads never overlap."""
    batches = asyncio.run(_run(slots=2, requests=32, rounds=8))
    overlapping = sum(1 for _, concurrent in batches if concurrent == 2)
    assert overlapping >= len(batches) // 2, batches
    sizes = [size for size, _ in batches]
    assert sum(sizes) / len(sizes) >= 8, sizes
