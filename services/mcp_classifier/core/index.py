"""The category index: example and description vectors, built once per categories file."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .categories import CategoryConfig
from .encoder import TextEncoder
from .scoring import Calibration, calibrate_leave_one_out, category_scores, softmax


@dataclass(frozen=True)
class CategoryIndex:
    config: CategoryConfig
    example_vectors: np.ndarray  # (N, d)
    example_labels: np.ndarray  # (N,)
    description_vectors: np.ndarray  # (C, d)
    calibration: Calibration

    @classmethod
    def build(cls, config: CategoryConfig, encoder: TextEncoder) -> CategoryIndex:
        texts: list[str] = []
        labels: list[int] = []
        for idx, category in enumerate(config.categories):
            texts.extend(category.examples)
            labels.extend([idx] * len(category.examples))
        descriptions = [c.description or c.name for c in config.categories]
        vectors = encoder.encode_documents(texts + descriptions)
        example_vectors, description_vectors = vectors[: len(texts)], vectors[len(texts) :]
        label_array = np.asarray(labels, dtype=np.int64)
        calibration = calibrate_leave_one_out(example_vectors, label_array, description_vectors, len(descriptions))
        return cls(config, example_vectors, label_array, description_vectors, calibration)

    @property
    def size(self) -> int:
        return int(self.example_vectors.shape[0] + self.description_vectors.shape[0])

    def probabilities(self, query_vectors: np.ndarray) -> np.ndarray:
        """(B, d) normalised query vectors -> (B, C) calibrated probabilities."""
        scores = category_scores(
            query_vectors @ self.example_vectors.T,
            self.example_labels,
            len(self.config.categories),
            query_vectors @ self.description_vectors.T,
        )
        return softmax(scores, self.calibration.temperature)
