"""Counts what every classify answer said (in scope, out of scope, language not served), whichever door asked
and whether the cache or the model answered: what an operator watches to see traffic the categories miss."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..classify.results import ClassificationResult, ClassifierInfo
from ..telemetry import GatewayMetrics
from .base import ClassificationBackend, EmbeddingKind


class AnswerCounts:
    """Wraps any backend; every other call passes straight through."""

    def __init__(self, inner: ClassificationBackend, metrics: GatewayMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        results = await self.inner.classify(texts)
        for result in results:
            self._metrics.observe_answer(result.in_scope, result.language_served, result.language)
        return results

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def info(self) -> ClassifierInfo:
        return await self.inner.info()

    async def ready(self) -> bool:
        return await self.inner.ready()

    async def reload_categories(self) -> bool:
        return await self.inner.reload_categories()

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        return await self.inner.embed(texts, kind)
