"""Counts what every classify answer said (in scope, out of scope, language not served), whichever door asked
and whether the cache or the model answered: what an operator watches to see traffic the categories miss."""

from __future__ import annotations

from collections.abc import Sequence

from ..classify.registry import DEFAULT
from ..classify.results import ClassificationResult
from ..telemetry import GatewayMetrics
from .base import BackendWrapper, ClassificationBackend, reload_categories_of


class AnswerCounts(BackendWrapper):
    """Wraps any backend and counts its answers; every other call passes straight through."""

    def __init__(self, inner: ClassificationBackend, metrics: GatewayMetrics) -> None:
        super().__init__(inner)
        self._metrics = metrics

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        results = await self.inner.predict(texts, classifier)
        for result in results:
            self._metrics.observe_answer(result.in_scope, result.language_served, result.language, classifier)
        return results

    async def reload_categories(self) -> bool:
        """Passed on: the gateway wraps its whole chain in this, and a reload must reach the cache and the model below."""
        return await reload_categories_of(self.inner)
