"""The in-process backend: concurrent requests share batches, answers equal unbatched ones, the loop stays free."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import psutil
import pytest

from mcp_classifier.backend.base import BackendOverloaded
from mcp_classifier.backend.coalescer import BatchingOptions
from mcp_classifier.backend.local import LocalBatchingBackend
from mcp_classifier.backend.model_worker import ThreadModelWorker
from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.classify.registry import DEFAULT, CategorySource, ClassifierRegistry
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

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


def _backend(classifier: Classifier, **overrides: int) -> LocalBatchingBackend:
    options = BatchingOptions(**{"batch_size": 32, "batch_window_ms": 5.0, "max_queue": 1024, **overrides})
    return LocalBatchingBackend(ThreadModelWorker(lambda: ClassifierRegistry.holding(classifier)), batching=options, request_timeout_s=30.0)


def test_concurrent_requests_are_batched_and_equal_unbatched_answers(classifier: Classifier) -> None:
    unbatched = [classifier.classify([t])[0] for t in TEXTS]

    async def run() -> tuple[list, int]:
        backend = _backend(classifier)
        await backend.start()
        try:
            results = await asyncio.gather(*(backend.predict([t]) for t in TEXTS))
            return [r[0] for r in results], backend.batches_run
        finally:
            await backend.close()

    batched, batches = asyncio.run(run())
    assert batches < len(TEXTS) / 2, f"{len(TEXTS)} concurrent requests ran in {batches} batches"
    for one, many in zip(unbatched, batched):
        assert one.class_index == many.class_index
        np.testing.assert_allclose(one.probabilities, many.probabilities, atol=1e-4)


def test_concurrent_embedding_requests_share_model_calls_and_equal_unbatched_vectors(classifier: Classifier) -> None:
    """/v1/embeddings from many clients: one text each, fewer model calls than requests, each kind with its own prompt."""
    kinds = ["query" if i % 3 else "document" for i in range(len(TEXTS))]
    unbatched = [classifier.embed([t], k)[0] for t, k in zip(TEXTS, kinds)]
    long_list = TEXTS * 2  # over the batch size: one model call of its own, as a tool list is

    async def run() -> tuple[list[np.ndarray], np.ndarray, int]:
        backend = _backend(classifier)
        calls = 0
        embed = backend.worker.embed

        async def counted(texts: list[str], kind: str) -> np.ndarray:
            nonlocal calls
            calls += 1
            return await embed(texts, kind)

        backend.worker.embed = counted  # type: ignore[method-assign]
        await backend.start()
        try:
            rows = await asyncio.gather(*(backend.embed([t], k) for t, k in zip(TEXTS, kinds)))  # type: ignore[arg-type]
            before = calls
            whole = await backend.embed(long_list, "document")
            assert calls == before + 1, "a list over the batch size is one model call"
            return [r[0] for r in rows], whole, before
        finally:
            await backend.close()

    batched, whole, calls = asyncio.run(run())
    assert calls < len(TEXTS) / 2, f"{len(TEXTS)} concurrent embedding requests took {calls} model calls"
    # A lone text may run on the fp16 weights (docs/decisions/0012): the same vector to a cosine of 0.9999
    cosines = np.einsum("ij,ij->i", np.stack(batched), np.stack(unbatched))
    assert cosines.min() > 0.9999, cosines.min()
    np.testing.assert_allclose(whole, classifier.embed(long_list, "document"), atol=1e-5)


def test_event_loop_keeps_running_while_the_model_works(classifier: Classifier) -> None:
    texts = TEXTS * 16  # 512 texts, run as 4 batches of 128
    tick_s = 0.005

    async def run() -> tuple[int, float]:
        backend = _backend(classifier, batch_size=128)
        await backend.start()
        try:
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(tick_s)

            task = asyncio.create_task(ticker())
            started = time.perf_counter()
            await asyncio.gather(*(backend.predict([t]) for t in texts))
            elapsed = time.perf_counter() - started
            task.cancel()
            return ticks, elapsed
        finally:
            await backend.close()

    # A loop blocked by the model would tick only between the 4 batches; a free loop ticks every
    # few ms all along. A quarter of the ideal rate leaves room for a busy, shared machine.
    ticks, elapsed = asyncio.run(run())
    assert ticks >= 0.25 * elapsed / tick_s, f"{ticks} ticks in {elapsed:.2f} s: the event loop was blocked"


def test_full_queue_refuses_with_overloaded(classifier: Classifier) -> None:
    async def run() -> list:
        backend = _backend(classifier, max_queue=2)
        await backend.start()
        try:
            return await asyncio.gather(*(backend.predict([t]) for t in TEXTS), return_exceptions=True)
        finally:
            await backend.close()

    outcomes = asyncio.run(run())
    refused = [o for o in outcomes if isinstance(o, BackendOverloaded)]
    served = [o for o in outcomes if isinstance(o, list)]
    assert refused and served and len(refused) + len(served) == len(TEXTS)


def test_model_processes_answer_like_the_thread_and_all_reload(classifier: Classifier, tmp_path) -> None:
    """--model-processes 2: two spawned model processes; equal answers, and a reload reaches both."""
    import shutil

    from mcp_classifier.backend.model_worker import ProcessModelWorker
    from tests.support.categories import DEFAULT_FILE, FINANCE_QUERY, write_with_finance

    categories = tmp_path / "categories.yaml"
    shutil.copy(DEFAULT_FILE, categories)
    settings = Settings(model="builtin:minilm", torch_threads=1, categories_file=categories)
    expected = [classifier.classify([t])[0] for t in TEXTS]

    async def run() -> tuple[list, list]:
        backend = LocalBatchingBackend(
            ProcessModelWorker(settings.model_dump_json(), processes=2),
            batching=BatchingOptions(batch_size=4, batch_window_ms=5.0, max_queue=1024, max_concurrent_batches=2),
            request_timeout_s=60.0,
        )
        await backend.start()
        try:
            before = [r[0] for r in await asyncio.gather(*(backend.predict([t]) for t in TEXTS))]
            write_with_finance(categories)
            assert await backend.reload_categories()
            after = [r[0] for r in await asyncio.gather(*(backend.predict([FINANCE_QUERY]) for _ in range(16)))]
            assert (await backend.health(need_info=True)).require_info().categories.names[-1] == "finance"
            return before, after
        finally:
            # the model processes, not multiprocessing's resource tracker (it lives as long as we do)
            children = [c for c in psutil.Process().children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]
            assert len(children) == 2
            await backend.close()
            _, alive = psutil.wait_procs(children, timeout=20)
            assert not alive, "model processes outlived close()"

    before, after = asyncio.run(run())
    for one, many in zip(expected, before):
        assert one.class_index == many.class_index
        np.testing.assert_allclose(one.probabilities, many.probabilities, atol=1e-4)
    assert all(len(r.probabilities) == 6 and r.category == "finance" for r in after)  # both processes reloaded


def test_two_model_threads_run_batches_side_by_side_with_unbatched_answers(classifier: Classifier) -> None:
    """The default on a multi-core CPU: batches overlap on two threads sharing one model."""
    import threading

    unbatched = [classifier.classify([t])[0] for t in TEXTS]
    active, most_active = 0, 0
    lock = threading.Lock()

    class CountingClassifier:
        """The real classifier, counting how many batches run at the same moment."""

        info = classifier.info
        config = classifier.config

        def classify(self, texts: list[str]) -> list:
            nonlocal active, most_active
            with lock:
                active += 1
                most_active = max(most_active, active)
            try:
                return classifier.classify(texts)
            finally:
                with lock:
                    active -= 1

    async def run() -> list:
        backend = LocalBatchingBackend(
            ThreadModelWorker(lambda: ClassifierRegistry.holding(CountingClassifier()), threads=2),
            batching=BatchingOptions(batch_size=8, batch_window_ms=5.0, max_queue=1024, max_concurrent_batches=2),
            request_timeout_s=30.0,
        )
        await backend.start()
        try:
            return [r[0] for r in await asyncio.gather(*(backend.predict([t]) for t in TEXTS * 2))]
        finally:
            await backend.close()

    answers = asyncio.run(run())
    assert most_active == 2, "the two model threads never overlapped"
    for one, many in zip(unbatched * 2, answers):
        assert one.class_index == many.class_index
        np.testing.assert_allclose(one.probabilities, many.probabilities, atol=1e-4)


def test_auto_torch_threads_share_the_cpus_among_concurrent_model_calls() -> None:
    import torch

    from mcp_classifier.wiring import fill_local_threading

    cpus = torch.get_num_threads()  # the budget fill_local_threading shares out
    assert fill_local_threading(Settings()).engine.torch_threads == 0  # one call in flight: torch's default
    assert fill_local_threading(Settings(model_threads=2)).engine.torch_threads == max(1, cpus // 2)
    assert fill_local_threading(Settings(model_threads=2 * cpus)).engine.torch_threads == 1
    assert fill_local_threading(Settings(model_processes=2)).engine.torch_threads == max(1, cpus // 2)
    assert fill_local_threading(Settings(model_threads=3, torch_threads=2)).engine.torch_threads == 2  # the operator's word wins


def test_numpy_blas_runs_single_threaded_once_a_model_is_built(classifier: Classifier) -> None:
    """OpenBLAS's idle threads spin for ~0.1 s after each matmul and took a core from the model."""
    from threadpoolctl import threadpool_info

    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas, "numpy loaded no BLAS library threadpoolctl knows"
    assert all(pool["num_threads"] == 1 for pool in blas), blas


def test_a_refused_categories_file_is_logged_once_as_refused(classifier: Classifier, tmp_path, caplog) -> None:
    """The real chain (HotReload, the backend, its model thread, the classifier): a bad file is one ERROR that keeps
    the live version, never also a "no change"; the good file after it is one "no change" and clears the error."""
    import logging
    import shutil

    from mcp_classifier.hot_reload import HotReload
    from tests.support.categories import DEFAULT_FILE

    categories = tmp_path / "categories.yaml"
    categories.write_text("categories: [this is: not, valid")
    version = classifier.versions[0]

    async def run() -> list[bool]:
        backend = LocalBatchingBackend(
            ThreadModelWorker(lambda: ClassifierRegistry.holding(classifier, CategorySource(categories))),
            batching=BatchingOptions(batch_size=4, batch_window_ms=5.0, max_queue=64),
            request_timeout_s=30.0,
        )
        await backend.start()
        reload = HotReload(backend, {DEFAULT: CategorySource(categories)})
        reload._lock = asyncio.Lock()  # what start() makes, without the file watch and the signal handler
        try:
            refused = await reload.reload("file change")
            refused_lines = [r for r in caplog.records if "categories reload" in r.getMessage()]
            shutil.copy(DEFAULT_FILE, categories)
            unchanged = await reload.reload("file change")
            assert (await backend.health(need_info=True)).require_info().reload_error is None
            return [refused, unchanged, len(refused_lines) == 1]
        finally:
            await backend.close()

    with caplog.at_level(logging.INFO, logger="mcp_classifier"):
        outcomes = asyncio.run(run())
    lines = [r for r in caplog.records if "categories reload" in r.getMessage()]
    assert outcomes == [False, False, True]
    assert [r.levelno for r in lines] == [logging.ERROR, logging.INFO], [r.getMessage() for r in lines]
    assert f"refused (file change), keeping version {version}" in lines[0].getMessage() and "not valid YAML" in lines[0].getMessage()
    assert "no change" in lines[1].getMessage() and "refused" not in lines[1].getMessage()
