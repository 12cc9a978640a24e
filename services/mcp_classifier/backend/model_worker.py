"""Where the in-process backend's model runs: one dedicated thread, so the event loop never waits on it.

(A child-process worker was tried to rule out GIL contention with the HTTP loop: on the
2-core box it served the same throughput as the thread, so the simpler thread stayed.)
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Protocol

from ..core.classifier import Classifier
from ..core.results import ClassificationResult, ClassifierInfo


class ModelWorker(Protocol):
    async def start(self) -> ClassifierInfo: ...
    async def classify(self, texts: list[str]) -> list[ClassificationResult]: ...
    async def info(self) -> ClassifierInfo: ...
    async def reload_categories(self, path: Path) -> bool: ...
    def close(self) -> None: ...


class ThreadModelWorker:
    """The model on one dedicated thread of this process (used by tests that hand in a classifier)."""

    def __init__(self, classifier_factory: Callable[[], Classifier]) -> None:
        self._factory = classifier_factory
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="classifier")
        self.classifier: Classifier | None = None

    async def start(self) -> ClassifierInfo:
        self.classifier = await asyncio.get_running_loop().run_in_executor(self._executor, self._factory)
        return self.classifier.info

    async def classify(self, texts: list[str]) -> list[ClassificationResult]:
        assert self.classifier is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.classifier.classify, texts)

    async def info(self) -> ClassifierInfo:
        assert self.classifier is not None
        return self.classifier.info

    async def reload_categories(self, path: Path) -> bool:
        """Rebuild the index on the model thread, between batches, so no batch sees a half-built one."""
        assert self.classifier is not None
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.classifier.reload_from, path)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
