"""The category index: example and description vectors and the fitted scorer, built once per categories file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..engine.encoder import TextEncoder
from .categories import SCOPE_FORMAT, CategoryConfig
from .fusion import CategoryScorer, LexicalMode, TokenMatching, fit_category_scorer
from .scope import ScopeModel, background_queries, fit_scope
from .scorers import ScoringMethod
from .scoring import Calibration
from .start_cache import StartCache, content_key
from .token_match import CategoryTokens, TokenSet


@dataclass(frozen=True)
class CategoryIndex:
    config: CategoryConfig
    example_vectors: np.ndarray  # (N, d)
    example_labels: np.ndarray  # (N,)
    description_vectors: np.ndarray  # (C, d)
    scorer: CategoryScorer
    scope: ScopeModel | None  # None where the file turns out-of-scope detection off

    @classmethod
    def build(
        cls,
        config: CategoryConfig,
        encoder: TextEncoder,
        method: ScoringMethod = "auto",
        lexical: LexicalMode = "auto",
        token_matching: TokenMatching = "off",
        cache: StartCache | None = None,
        background: bool = True,
    ) -> CategoryIndex:
        """Embed the category texts and fit the scorer and the scope; with ``cache``, what an earlier start
        computed is reused. ``background``: the packaged off-topic queries join the file's own as negatives."""
        texts: list[str] = []
        labels: list[int] = []
        for idx, category in enumerate(config.categories):
            texts.extend(category.examples)
            labels.extend([idx] * len(category.examples))
        descriptions = [c.description or c.name for c in config.categories]
        # A category's own words are its name's and description's: what its BM25 document and own tokens start from.
        own_texts = category_texts(config)
        label_array = np.asarray(labels, dtype=np.int64)
        token_sets: tuple[Sequence[TokenSet], Sequence[TokenSet]] | None = None  # the examples' and each category's own
        indexed = texts + descriptions
        if token_matching == "off":
            vectors = cache.documents(encoder, indexed, with_tokens=False)[0] if cache else encoder.encode_documents(indexed)
        else:
            if cache:  # one read and at most one write of the cached texts for the whole build
                vectors, all_tokens = cache.documents(encoder, indexed + own_texts, with_tokens=True)
                assert all_tokens is not None
                vectors, token_sets = vectors[: len(indexed)], (all_tokens[: len(texts)], all_tokens[len(indexed) :])
            else:
                vectors, example_tokens = encoder.encode_with_tokens(indexed, query=False)
                _, own_tokens = encoder.encode_with_tokens(own_texts, query=False)
                token_sets = (example_tokens[: len(texts)], own_tokens)
        example_vectors, description_vectors = vectors[: len(texts)], vectors[len(texts) :]

        def fit() -> CategoryScorer:
            # The token bags only here: a scorer that keeps them carries them, so a cached one needs none built.
            tokens = CategoryTokens(token_sets[1], token_sets[0], label_array, device=encoder.device) if token_sets else None
            return fit_category_scorer(method, example_vectors, texts, label_array, description_vectors, own_texts, lexical, tokens)

        def fit_the_scope() -> ScopeModel | None:
            return _fit_scope(config, encoder, example_vectors, label_array, description_vectors, cache, background)

        if cache is None:
            return cls(config, example_vectors, label_array, description_vectors, fit(), fit_the_scope())
        key = content_key(texts, labels, descriptions, own_texts, method, lexical, token_matching)
        scope_key = content_key(
            "scope", SCOPE_FORMAT, texts, labels, descriptions, config.detect_out_of_scope, config.out_of_scope_examples, background,
            tuple(c.threshold for c in config.categories),
        )  # fmt: skip
        return cls(
            config,
            example_vectors,
            label_array,
            description_vectors,
            cache.fitted(key, fit),
            cache.fitted(scope_key, fit_the_scope, "scope"),
        )

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


def _fit_scope(
    config: CategoryConfig,
    encoder: TextEncoder,
    example_vectors: np.ndarray,
    labels: np.ndarray,
    description_vectors: np.ndarray,
    cache: StartCache | None,
    background: bool,
) -> ScopeModel | None:
    """The out-of-scope model, with the file's own off-topic examples and the packaged background as negatives."""
    if not config.detect_out_of_scope:
        return None
    negatives = list(config.out_of_scope_examples) + (list(background_queries()) if background else [])
    if not negatives:
        negative_vectors = np.zeros((0, example_vectors.shape[1]), dtype=example_vectors.dtype)
    elif cache:
        negative_vectors = cache.documents(encoder, negatives, with_tokens=False)[0]
    else:
        negative_vectors = encoder.encode_documents(negatives)
    overrides = tuple(c.threshold for c in config.categories)
    background_from = len(config.out_of_scope_examples) if background else None
    return fit_scope(example_vectors, labels, description_vectors, negative_vectors, overrides, background_from)
