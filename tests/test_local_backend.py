"""The in-process backend: concurrent requests share batches, answers equal unbatched ones, the loop stays free."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from mcp_classifier.backend.base import BackendOverloaded
from mcp_classifier.backend.factory import build_classifier
from mcp_classifier.backend.local import LocalBatchingBackend
from mcp_classifier.backend.model_worker import ThreadModelWorker
from mcp_classifier.core.classifier import Classifier
from mcp_classifier.settings import Settings

TEXTS = [
    "what is 12 percent of 250",
    "how do vaccines train the immune system",
    "write a bash loop over files in a directory",
    "what started the hundred years war",
    "any tips for sleeping better",
    "what is the integral of 1/x",
    "explain how a transistor works",
    "who was the first emperor of china",
] * 4


@pytest.fixture(scope="module")
def classifier() -> Classifier:
    return build_classifier(Settings(model="builtin:minilm"))


def _backend(classifier: Classifier, **overrides: float) -> LocalBatchingBackend:
    options = {"batch_size": 32, "batch_window_ms": 5.0, "max_queue": 1024, "request_timeout_s": 30.0, **overrides}
    return LocalBatchingBackend(ThreadModelWorker(lambda: classifier), **options)  # type: ignore[arg-type]


def test_concurrent_requests_are_batched_and_equal_unbatched_answers(classifier: Classifier) -> None:
    unbatched = [classifier.classify([t])[0] for t in TEXTS]

    async def run() -> tuple[list, int]:
        backend = _backend(classifier)
        await backend.start()
        try:
            results = await asyncio.gather(*(backend.classify([t]) for t in TEXTS))
            return [r[0] for r in results], backend.batches_run
        finally:
            await backend.close()

    batched, batches = asyncio.run(run())
    assert batches < len(TEXTS) / 2, f"{len(TEXTS)} concurrent requests ran in {batches} batches"
    for one, many in zip(unbatched, batched):
        assert one.class_index == many.class_index
        np.testing.assert_allclose(one.probabilities, many.probabilities, atol=1e-4)


def test_event_loop_keeps_running_while_the_model_works(classifier: Classifier) -> None:
    texts = TEXTS * 16  # 512 texts, run as batches of 128
    started = time.perf_counter()
    classifier.classify(texts[:128])
    one_batch_s = time.perf_counter() - started  # how long a loop blocked by one batch would stall

    async def run() -> float:
        backend = _backend(classifier, batch_size=128)
        await backend.start()
        try:
            ticks: list[float] = []

            async def ticker() -> None:
                while True:
                    ticks.append(time.perf_counter())
                    await asyncio.sleep(0.005)

            task = asyncio.create_task(ticker())
            await asyncio.gather(*(backend.classify([t]) for t in texts))
            task.cancel()
            return max(b - a for a, b in zip(ticks, ticks[1:]))
        finally:
            await backend.close()

    # Relative to the batch time, so a slow or busy machine scales both sides alike.
    longest_gap = asyncio.run(run())
    assert longest_gap < one_batch_s / 2, f"loop stalled {longest_gap:.3f} s; one batch takes {one_batch_s:.3f} s"


def test_full_queue_refuses_with_overloaded(classifier: Classifier) -> None:
    async def run() -> list:
        backend = _backend(classifier, max_queue=2)
        await backend.start()
        try:
            return await asyncio.gather(*(backend.classify([t]) for t in TEXTS), return_exceptions=True)
        finally:
            await backend.close()

    outcomes = asyncio.run(run())
    refused = [o for o in outcomes if isinstance(o, BackendOverloaded)]
    served = [o for o in outcomes if isinstance(o, list)]
    assert refused and served and len(refused) + len(served) == len(TEXTS)
