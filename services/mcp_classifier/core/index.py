"""The category index: example and description vectors and the fitted scorer, built once per categories file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .categories import CategoryConfig
from .encoder import TextEncoder
from .fusion import CategoryScorer, LexicalMode, fit_category_scorer
from .scorers import ScoringMethod
from .scoring import Calibration


@dataclass(frozen=True)
class CategoryIndex:
    config: CategoryConfig
    example_vectors: np.ndarray  # (N, d)
    example_labels: np.ndarray  # (N,)
    description_vectors: np.ndarray  # (C, d)
    scorer: CategoryScorer

    @classmethod
    def build(
        cls, config: CategoryConfig, encoder: TextEncoder, method: ScoringMethod = "auto", lexical: LexicalMode = "auto"
    ) -> CategoryIndex:
        texts: list[str] = []
        labels: list[int] = []
        for idx, category in enumerate(config.categories):
            texts.extend(category.examples)
            labels.extend([idx] * len(category.examples))
        descriptions = [c.description or c.name for c in config.categories]
        vectors = encoder.encode_documents(texts + descriptions)
        example_vectors, description_vectors = vectors[: len(texts)], vectors[len(texts) :]
        label_array = np.asarray(labels, dtype=np.int64)
        scorer = fit_category_scorer(method, example_vectors, texts, label_array, description_vectors, category_texts(config), lexical)
        return cls(config, example_vectors, label_array, description_vectors, scorer)

    @property
    def calibration(self) -> Calibration:
        """The softmax temperature, and the accuracy on examples each scored without itself (leave-one-out or k-fold)."""
        return Calibration(temperature=self.scorer.temperature, loo_accuracy=self.scorer.held_out_accuracy)

    @property
    def size(self) -> int:
        return int(self.example_vectors.shape[0] + self.description_vectors.shape[0])

    def probabilities(self, query_vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """(B, d) normalised query vectors and their texts -> (B, C) calibrated probabilities."""
        return self.scorer.probabilities(query_vectors, texts)


def category_texts(config: CategoryConfig) -> list[str]:
    """The words each category's BM25 document starts from: its name (as words) and description."""
    return [f"{c.name.replace('_', ' ').replace('-', ' ')} {c.description or ''}" for c in config.categories]
