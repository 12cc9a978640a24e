"""The category index: example and description vectors and the fitted scorer, built once per categories file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..engine.encoder import TextEncoder
from .categories import CategoryConfig
from .fusion import CategoryScorer, LexicalMode, TokenMatching, fit_category_scorer
from .scorers import ScoringMethod
from .scoring import Calibration
from .token_match import CategoryTokens, TokenSet


@dataclass(frozen=True)
class CategoryIndex:
    config: CategoryConfig
    example_vectors: np.ndarray  # (N, d)
    example_labels: np.ndarray  # (N,)
    description_vectors: np.ndarray  # (C, d)
    scorer: CategoryScorer

    @classmethod
    def build(
        cls,
        config: CategoryConfig,
        encoder: TextEncoder,
        method: ScoringMethod = "auto",
        lexical: LexicalMode = "auto",
        token_matching: TokenMatching = "off",
    ) -> CategoryIndex:
        texts: list[str] = []
        labels: list[int] = []
        for idx, category in enumerate(config.categories):
            texts.extend(category.examples)
            labels.extend([idx] * len(category.examples))
        descriptions = [c.description or c.name for c in config.categories]
        label_array = np.asarray(labels, dtype=np.int64)
        tokens = None
        if token_matching == "off":
            vectors = encoder.encode_documents(texts + descriptions)
        else:
            vectors, example_tokens = encoder.encode_with_tokens(texts + descriptions, query=False)
            # A category's own tokens are its name's and description's: the words its BM25 document starts from.
            _, own_tokens = encoder.encode_with_tokens(category_texts(config), query=False)
            tokens = CategoryTokens(own_tokens, example_tokens[: len(texts)], label_array, device=encoder.device)
        example_vectors, description_vectors = vectors[: len(texts)], vectors[len(texts) :]
        scorer = fit_category_scorer(
            method, example_vectors, texts, label_array, description_vectors, category_texts(config), lexical, tokens
        )
        return cls(config, example_vectors, label_array, description_vectors, scorer)

    @property
    def calibration(self) -> Calibration:
        """The softmax temperature, and the accuracy on examples each scored without itself (leave-one-out or k-fold)."""
        return Calibration(temperature=self.scorer.temperature, loo_accuracy=self.scorer.held_out_accuracy)

    @property
    def size(self) -> int:
        return int(self.example_vectors.shape[0] + self.description_vectors.shape[0])

    @property
    def uses_tokens(self) -> bool:
        return self.scorer.uses_tokens

    def probabilities(self, query_vectors: np.ndarray, texts: Sequence[str], query_tokens: Sequence[TokenSet] | None = None) -> np.ndarray:
        """(B, d) normalised query vectors, their texts (and token vectors, where ``uses_tokens``) -> (B, C) calibrated probabilities."""
        return self.scorer.probabilities(query_vectors, texts, query_tokens)


def category_texts(config: CategoryConfig) -> list[str]:
    """The words each category's BM25 document starts from: its name (as words) and description."""
    return [f"{c.name.replace('_', ' ').replace('-', ' ')} {c.description or ''}" for c in config.categories]
