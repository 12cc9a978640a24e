"""Routing policy: category + confidence + query complexity -> (model, use_reasoning)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .categories import CategoryConfig

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class RoutingDecision:
    model: str
    use_reasoning: bool
    reason: str  # which rule decided: category, low_confidence, long_query, reasoning_marker


class RoutingPolicy:
    """Rules in order: low confidence escalates; long or reasoning-heavy queries turn reasoning on."""

    def __init__(self, config: CategoryConfig) -> None:
        self._config = config
        policy = config.policy
        markers = sorted(policy.complexity.reasoning_markers, key=len, reverse=True)
        self._marker_pattern = re.compile(r"\b(?:" + "|".join(re.escape(m.lower()) for m in markers) + r")\b") if markers else None

    def decide(self, class_index: int, confidence: float, text: str) -> RoutingDecision:
        policy = self._config.policy
        category = self._config.categories[class_index]
        model = category.model or policy.default_model
        low = policy.low_confidence
        if confidence < low.threshold:
            return RoutingDecision(low.model or model, low.use_reasoning or category.use_reasoning, "low_confidence")
        if category.use_reasoning:
            return RoutingDecision(model, True, "category")
        if len(_WORD.findall(text)) >= policy.complexity.long_query_words:
            return RoutingDecision(model, True, "long_query")
        if self._marker_pattern is not None and self._marker_pattern.search(text.lower()):
            return RoutingDecision(model, True, "reasoning_marker")
        return RoutingDecision(model, False, "category")
