"""The category scorer a classifier runs: an embedding scorer, plus word and token matches where they help.

Scores are the embedding scorer's calibrated log-probabilities plus ``weight`` × the query's z-scored
BM25 against each category (core.lexical) plus ``token_weight`` × its z-scored token matches
(core.token_match), under one more fitted temperature. Both weights are chosen together per
categories file from LEXICAL_WEIGHTS by out-of-fold log loss on the user's own examples (the
embedding side out of fold, BM25 and token bags k-fold), so a file whose words or tokens do not
help gets weight 0 for them.

Measured on five few-shot category sets written for this (docs/decisions/0022-lexical-fusion.md): +1.4 points of held-out
accuracy on average (+3.7 on the set with the most tool jargon, weight 0 picked on one set); the
default categories, with dozens of examples each, move within noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .lexical import CategoryLexicon
from .scorers import CV_FOLDS, FittedScorer, ScoringMethod, fit_scorer, stratified_folds
from .scoring import fit_temperature, softmax
from .token_match import CategoryTokens, TokenSet

LexicalMode = Literal["auto", "off"]
TokenMatching = Literal["auto", "off"]
# Tried in order, for BM25 and token matches alike (both z-scored per query); ties keep the smaller weights.
LEXICAL_WEIGHTS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 1.5)
FUSED_TEMPERATURE_BOUNDS = (1e-2, 10.0)
SELECTION_STANDARD_ERRORS = 1.0  # how clearly the words must beat the embeddings alone, out of fold  # the inputs are already calibrated log-probabilities: T stays near 1


def _log_softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    z = scores / temperature
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _per_example_nll(probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(probabilities[np.arange(len(labels)), labels], 1e-12, 1.0))


@dataclass(frozen=True)
class CategoryScorer:
    embedding: FittedScorer
    lexicon: CategoryLexicon | None  # None where its weight is 0, as tokens below: that side is not scored
    weight: float  # BM25's; 0 and token_weight 0: the embedding scorer alone (its own temperature)
    temperature: float
    out_of_fold: np.ndarray  # (N, C) fused scores of examples the scorer had not seen
    labels: np.ndarray
    tokens: CategoryTokens | None = None
    token_weight: float = 0.0

    @property
    def method(self) -> str:
        return self.embedding.method + "+tokens" * bool(self.token_weight) + "+bm25" * bool(self.weight)

    @property
    def uses_tokens(self) -> bool:
        """Whether queries must bring their token vectors (TextEncoder.encode_with_tokens)."""
        return self.tokens is not None

    @property
    def held_out_accuracy(self) -> float:
        return float((self.out_of_fold.argmax(axis=1) == self.labels).mean())

    def probabilities(self, query_vectors: np.ndarray, texts: Sequence[str], query_tokens: Sequence[TokenSet] | None = None) -> np.ndarray:
        """(B, d) unit query vectors, the B texts they came from and, where ``uses_tokens``, their token vectors
        -> (B, C) calibrated probabilities."""
        if self.lexicon is None and self.tokens is None:
            return self.embedding.probabilities(query_vectors)
        fused = _log_softmax(self.embedding.scorer.scores(query_vectors), self.embedding.temperature)
        if self.lexicon is not None:
            fused = fused + self.weight * self.lexicon.scores(texts)
        if self.tokens is not None:
            if query_tokens is None:
                raise ValueError("this categories file scores token matches: pass the queries' token vectors")
            fused = fused + self.token_weight * self.tokens.scores(query_tokens)
        return softmax(fused, self.temperature)


def fit_category_scorer(
    method: ScoringMethod,
    example_vectors: np.ndarray,
    example_texts: Sequence[str],
    labels: np.ndarray,
    description_vectors: np.ndarray,
    category_texts: Sequence[str],
    lexical: LexicalMode = "auto",
    tokens: CategoryTokens | None = None,
) -> CategoryScorer:
    """category_texts: each category's name and description, the words its BM25 document starts from.

    tokens: the categories' token bags (token matching on), or None (off).
    """
    n = len(category_texts)
    embedding = fit_scorer(method, example_vectors, labels, description_vectors, n)
    alone = CategoryScorer(embedding, None, 0.0, embedding.temperature, embedding.out_of_fold, labels)
    if (lexical == "off" and tokens is None) or not len(labels):
        return alone
    folds = stratified_folds(labels, max(2, min(CV_FOLDS, int(np.bincount(labels).max()))))
    lexicon = CategoryLexicon(category_texts, example_texts, labels) if lexical != "off" else None
    embedding_log_probs = _log_softmax(embedding.out_of_fold, embedding.temperature)
    lexical_scores = lexicon.out_of_fold(folds) if lexicon is not None else None
    token_scores = tokens.out_of_fold(folds) if tokens is not None else None
    candidates = []
    # Weights 0 re-tempered too, so words and tokens win only on their merit, not on a free temperature.
    for weight in LEXICAL_WEIGHTS if lexical_scores is not None else (0.0,):
        for token_weight in LEXICAL_WEIGHTS if token_scores is not None else (0.0,):
            fused = embedding_log_probs
            if lexical_scores is not None:
                fused = fused + weight * lexical_scores
            if token_scores is not None:
                fused = fused + token_weight * token_scores
            temperature = fit_temperature(fused, labels, bounds=FUSED_TEMPERATURE_BOUNDS)
            losses = _per_example_nll(softmax(fused, temperature), labels)
            candidates.append((weight, token_weight, temperature, fused, losses))
    weight, token_weight, temperature, fused, losses = min(candidates, key=lambda c: float(c[4].mean()))
    if not (weight or token_weight) or not _clearly_better(losses, candidates[0][4]):
        return alone
    return CategoryScorer(
        embedding, lexicon if weight else None, weight, temperature, fused, labels, tokens if token_weight else None, token_weight
    )


def _clearly_better(losses: np.ndarray, baseline: np.ndarray) -> bool:
    """The best of the weights looks better than none by chance alone: ask for a paired gain over one standard error."""
    gain = baseline - losses
    return bool(gain.mean() > SELECTION_STANDARD_ERRORS * gain.std(ddof=1) / np.sqrt(len(gain)))
