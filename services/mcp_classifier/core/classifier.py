"""Texts -> full classification results: encoder + category index + routing policy."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .categories import CategoryConfig
from .encoder import TextEncoder
from .index import CategoryIndex
from .routing import RoutingPolicy
from .scoring import entropy_nats

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClassificationResult:
    """Always carries the probabilities, so one cached entry serves both with_probabilities forms."""

    class_index: int
    category: str
    confidence: float
    model: str
    use_reasoning: bool
    probabilities: tuple[float, ...]
    entropy: float

    def to_public(self, with_probabilities: bool) -> dict[str, Any]:
        """The classify_text JSON (DESIGN §3)."""
        out: dict[str, Any] = {
            "class": self.class_index,
            "category": self.category,
            "confidence": self.confidence,
            "model": self.model,
            "use_reasoning": self.use_reasoning,
        }
        if with_probabilities:
            out["probabilities"] = list(self.probabilities)
            out["entropy"] = self.entropy
        return out

    def to_dict(self) -> dict[str, Any]:
        return self.to_public(with_probabilities=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClassificationResult":
        return cls(
            class_index=int(data["class"]),
            category=str(data["category"]),
            confidence=float(data["confidence"]),
            model=str(data["model"]),
            use_reasoning=bool(data["use_reasoning"]),
            probabilities=tuple(float(p) for p in data["probabilities"]),
            entropy=float(data["entropy"]),
        )


@dataclass(frozen=True)
class ClassifierInfo:
    model_id: str
    device: str
    dtype: str
    pooling: str
    categories: CategoryConfig
    category_set_version: str
    policy_version: str
    index_size: int
    temperature: float
    loo_accuracy: float


class Classifier:
    """Synchronous and CPU/GPU-bound: callers run it off the event loop (worker thread or replica)."""

    def __init__(self, encoder: TextEncoder, config: CategoryConfig) -> None:
        self.encoder = encoder
        self._install(config)

    def _install(self, config: CategoryConfig) -> None:
        index = CategoryIndex.build(config, encoder=self.encoder)
        # One assignment swaps index and policy together, so a concurrent batch sees old or new, never a mix.
        self._state = (config, index, RoutingPolicy(config))
        log.info(
            "category index built: %d categories, %d vectors, temperature %.4f, leave-one-out accuracy %.3f",
            len(config.categories), index.size, index.calibration.temperature, index.calibration.loo_accuracy,
        )

    def reload(self, config: CategoryConfig) -> None:
        self._install(config)

    @property
    def info(self) -> ClassifierInfo:
        config, index, _ = self._state
        enc = self.encoder.info
        return ClassifierInfo(
            model_id=enc.model_id,
            device=enc.device,
            dtype=enc.dtype,
            pooling=enc.pooling,
            categories=config,
            category_set_version=config.category_set_version,
            policy_version=config.policy_version,
            index_size=index.size,
            temperature=index.calibration.temperature,
            loo_accuracy=index.calibration.loo_accuracy,
        )

    def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        config, index, policy = self._state
        if not texts:
            return []
        probs = index.probabilities(self.encoder.encode_queries(texts))
        entropies = entropy_nats(probs)
        results = []
        for text, row, ent in zip(texts, probs, entropies):
            cls = int(np.argmax(row))
            confidence = float(row[cls])
            decision = policy.decide(cls, confidence, text)
            results.append(
                ClassificationResult(
                    class_index=cls,
                    category=config.categories[cls].name,
                    confidence=confidence,
                    model=decision.model,
                    use_reasoning=decision.use_reasoning,
                    probabilities=tuple(float(p) for p in row),
                    entropy=float(ent),
                )
            )
        return results
