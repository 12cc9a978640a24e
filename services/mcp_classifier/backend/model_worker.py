"""Where the in-process backend's model runs, so the event loop never waits on it: dedicated
threads sharing one model (the default), or N spawned model processes (`--model-processes N`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..classify.registry import DEFAULT
from ..classify.results import ClassificationResult, ClassifierInfo

if TYPE_CHECKING:  # torch and transformers load on the model thread, not at import: the doors open first
    from ..classify.classifier import Classifier
    from ..classify.registry import ClassifierRegistry


class ModelWorker(Protocol):
    """Where the model runs. ``classify`` takes (classifier name, text) pairs: one batch may ask several classifiers."""

    @property
    def names(self) -> tuple[str, ...]:
        """The classifiers served, by name (known once started)."""

    async def start(self) -> ClassifierInfo: ...
    async def classify(self, asked: list[tuple[str, str]]) -> list[ClassificationResult]: ...
    async def info(self) -> ClassifierInfo: ...
    async def infos(self) -> dict[str, ClassifierInfo]: ...
    async def reload_categories(self) -> bool: ...
    async def embed(self, texts: list[str], kind: str) -> np.ndarray: ...
    def close(self) -> None: ...


class ThreadModelWorker:
    """One model shared by `threads` dedicated threads of this process, one batch each.

    torch releases the GIL inside its kernels, so single-threaded calls on several threads run
    side by side; the tokenizer is serialised by the encoder, and a category reload swaps the
    index in one assignment, so a batch never sees half of one.
    """

    def __init__(self, registry_factory: Callable[[], ClassifierRegistry], *, threads: int = 1) -> None:
        self._factory = registry_factory
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="classifier")
        self.registry: ClassifierRegistry | None = None
        self.classifier: Classifier | None = None  # the registry's default: the same object across reloads

    async def start(self) -> ClassifierInfo:
        self.registry = await asyncio.get_running_loop().run_in_executor(self._executor, self._factory)
        self.classifier = self.registry.get()
        return self.classifier.info

    @property
    def names(self) -> tuple[str, ...]:
        return self.registry.names if self.registry is not None else ()

    async def classify(self, asked: list[tuple[str, str]]) -> list[ClassificationResult]:
        assert self.registry is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.registry.classify, asked)

    async def info(self) -> ClassifierInfo:
        assert self.classifier is not None
        return self.classifier.info

    async def infos(self) -> dict[str, ClassifierInfo]:
        registry = self.registry
        assert registry is not None
        return {name: registry.get(name).info for name in registry.names}

    async def embed(self, texts: list[str], kind: str) -> np.ndarray:
        assert self.classifier is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.classifier.embed, texts, kind)

    async def reload_categories(self) -> bool:
        """The registry re-reads every classifier's file on a model thread, off the event loop; each new index goes live in one swap."""
        assert self.registry is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.registry.reload_all)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# ---- worker processes --------------------------------------------------------------------------
# Module-level functions: the process pool pickles references to them.
_child_registry: ClassifierRegistry | None = None
_child_classifier: Classifier | None = None


def _child_init(settings_json: str) -> None:
    global _child_registry, _child_classifier
    from ..classify.build import build_registry
    from ..settings import Settings

    _child_registry = build_registry(Settings.model_validate_json(settings_json))
    _child_classifier = _child_registry.get()


def _child_classify(asked: list[tuple[str, str]]) -> list[ClassificationResult]:
    assert _child_registry is not None
    return _child_registry.classify(asked)


def _child_embed(texts: list[str], kind: str) -> np.ndarray:
    assert _child_classifier is not None
    return _child_classifier.embed(texts, kind)


def _child_infos() -> dict[str, ClassifierInfo]:
    registry = _child_registry
    assert registry is not None
    return {name: registry.get(name).info for name in registry.names}


def _child_reload() -> bool:
    assert _child_registry is not None
    return _child_registry.reload_all()


class ProcessModelWorker:
    """N spawned processes, one model each, one batch each at a time.

    Each has its own interpreter, so the HF modules' Python between torch ops never waits for
    the HTTP loop's GIL; the price is a model copy per process and pickled results. Each process
    runs torch with `torch_threads` threads (by default its share of the cores).
    """

    def __init__(self, settings_json: str, processes: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")  # never fork a process that holds torch threads
        self._executors = [
            ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_child_init, initargs=(settings_json,))
            for _ in range(processes)
        ]
        self._idle: asyncio.Queue[ProcessPoolExecutor] | None = None
        self._infos: dict[str, ClassifierInfo] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._infos)

    async def start(self) -> ClassifierInfo:
        loop = asyncio.get_running_loop()
        infos = await asyncio.gather(*(loop.run_in_executor(e, _child_infos) for e in self._executors))
        self._idle = asyncio.Queue()
        for executor in self._executors:
            self._idle.put_nowait(executor)
        self._infos = infos[0]
        return self._infos[DEFAULT]

    async def classify(self, asked: list[tuple[str, str]]) -> list[ClassificationResult]:
        assert self._idle is not None
        executor = await self._idle.get()
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, _child_classify, asked)
        finally:
            self._idle.put_nowait(executor)

    async def info(self) -> ClassifierInfo:
        return self._infos[DEFAULT]

    async def infos(self) -> dict[str, ClassifierInfo]:
        return self._infos

    async def embed(self, texts: list[str], kind: str) -> np.ndarray:
        assert self._idle is not None
        executor = await self._idle.get()
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, _child_embed, texts, kind)
        finally:
            self._idle.put_nowait(executor)

    async def reload_categories(self) -> bool:
        """Every process's registry reloads (each between its own batches); info follows the first."""
        loop = asyncio.get_running_loop()
        changed = await asyncio.gather(*(loop.run_in_executor(e, _child_reload) for e in self._executors))
        self._infos = await loop.run_in_executor(self._executors[0], _child_infos)
        return any(changed)

    def close(self) -> None:
        # Wait: the processes are idle by now, and not waiting would leave them orphaned.
        for executor in self._executors:
            executor.shutdown(wait=True, cancel_futures=True)
