"""Scoring methods: example and description vectors -> per-category scores, calibrated out of fold.

Each method is fitted once per categories file (at start and on reload) and then scores batches
of query vectors. Their scores go through one softmax whose temperature is fitted on scores the
method made for examples it had not seen (leave-one-out or k-fold), so probabilities stay honest.

- ``neighbours``: the mean of the top-k most similar examples per category, blended with the
  description's similarity. Strong with many examples per category.
- ``prototype``: the same, blended with the similarity to the category's centroid, which is
  steadier when a category has few examples.
- ``linear``: a multinomial logistic-regression head on the embeddings (examples and the
  descriptions as extra points), its L2 strength chosen by stratified k-fold log loss; it learns
  which directions separate the user's own categories, which similarity alone cannot.
- ``ensemble``: the linear head's and the prototype scorer's log-probabilities, averaged.
- ``auto`` (the default): fits neighbours, prototype and linear and keeps the one whose
  out-of-fold log loss on the user's own examples is lowest. Measured on category sets written
  for this (docs/decisions/0021-scoring-method-auto.md): neighbours wins where categories have dozens of examples, the linear
  head where they have six to ten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Literal, Protocol

import numpy as np

from .scoring import DESCRIPTION_WEIGHT, TOP_K, category_scores, fit_temperature, softmax

ScoringMethod = Literal["auto", "neighbours", "prototype", "linear", "ensemble"]
SCORING_METHODS: tuple[ScoringMethod, ...] = ("auto", "neighbours", "prototype", "linear", "ensemble")
AUTO_CANDIDATES: tuple[ScoringMethod, ...] = ("neighbours", "prototype", "linear")

PROTOTYPE_WEIGHT = 0.5  # share of the centroid similarity in the prototype scorer's example score
LINEAR_STRENGTHS = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)  # inverse L2 strengths tried (sklearn's C), on unit vectors
CV_FOLDS = 5  # folds for the linear head's strength and its out-of-fold temperature
SEED = 0  # fold assignment: fixed, so a categories file always yields the same index


class Scorer(Protocol):
    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        """(B, d) unit query vectors -> (B, C) scores; probabilities are softmax(scores / temperature)."""
        ...


@dataclass(frozen=True)
class FittedScorer:
    scorer: Scorer
    temperature: float
    out_of_fold: np.ndarray  # (N, C) each example's scores from a scorer that had not seen it
    labels: np.ndarray
    method: str = ""

    @property
    def out_of_fold_log_loss(self) -> float:
        return _nll(softmax(self.out_of_fold, self.temperature), self.labels)

    @property
    def held_out_accuracy(self) -> float:
        return float((self.out_of_fold.argmax(axis=1) == self.labels).mean())

    def probabilities(self, query_vectors: np.ndarray) -> np.ndarray:
        return softmax(self.scorer.scores(query_vectors), self.temperature)


@dataclass(frozen=True)
class NeighbourScorer:
    example_vectors: np.ndarray
    labels: np.ndarray
    description_vectors: np.ndarray
    n_categories: int
    prototype_weight: float = 0.0

    @cached_property
    def category_centroids(self) -> np.ndarray:
        """Worked out once per index, not per query batch."""
        return centroids(self.example_vectors, self.labels, self.description_vectors)

    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        description_sims = query_vectors @ self.description_vectors.T
        scores = category_scores(query_vectors @ self.example_vectors.T, self.labels, self.n_categories, description_sims, top_k=TOP_K)
        if self.prototype_weight:
            centroid_sims = query_vectors @ self.category_centroids.T
            blended = (1 - DESCRIPTION_WEIGHT) * centroid_sims + DESCRIPTION_WEIGHT * description_sims
            scores = (1 - self.prototype_weight) * scores + self.prototype_weight * blended
        return scores

    def leave_one_out_scores(self) -> np.ndarray:
        """Each example scored against all the others (itself excluded from neighbours and centroid)."""
        sims = self.example_vectors @ self.example_vectors.T
        np.fill_diagonal(sims, -np.inf)
        scores = category_scores(sims, self.labels, self.n_categories, self.example_vectors @ self.description_vectors.T)
        if self.prototype_weight:
            centroid_sims = np.empty_like(scores)
            for i in range(len(self.labels)):
                keep = np.arange(len(self.labels)) != i
                others = centroids(self.example_vectors[keep], self.labels[keep], self.description_vectors)
                centroid_sims[i] = others @ self.example_vectors[i]
            description_sims = self.example_vectors @ self.description_vectors.T
            blended = (1 - DESCRIPTION_WEIGHT) * centroid_sims + DESCRIPTION_WEIGHT * description_sims
            scores = (1 - self.prototype_weight) * scores + self.prototype_weight * blended
        return scores


def centroids(example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray) -> np.ndarray:
    """Unit mean vector per category; the description stands in for a category with no examples."""
    out = description_vectors.copy()
    for c in range(description_vectors.shape[0]):
        members = example_vectors[labels == c]
        if len(members):
            mean = members.mean(axis=0)
            out[c] = mean / max(float(np.linalg.norm(mean)), 1e-12)
    return out


@dataclass(frozen=True)
class LinearScorer:
    """Logits of a logistic-regression head (scikit-learn), one column per category."""

    weights: np.ndarray  # (C, d)
    bias: np.ndarray  # (C,)

    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        return query_vectors @ self.weights.T + self.bias


@dataclass(frozen=True)
class EnsembleScorer:
    """Mean of the members' calibrated log-probabilities: a score whose softmax is their geometric mean."""

    members: tuple[FittedScorer, ...]

    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        return np.mean([np.log(np.clip(m.probabilities(query_vectors), 1e-12, 1.0)) for m in self.members], axis=0)


def _training_set(example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Examples plus each description as one more point of its category."""
    x = np.vstack([example_vectors, description_vectors])
    y = np.concatenate([labels, np.arange(description_vectors.shape[0])])
    return x, y


def _fit_linear(x: np.ndarray, y: np.ndarray, n_categories: int, strength: float) -> LinearScorer:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=strength, max_iter=2000)
    model.fit(x, y)
    weights = np.zeros((n_categories, x.shape[1]))
    bias = np.full(n_categories, -1e3)  # a category the head never saw can never win
    weights[model.classes_] = model.coef_ if len(model.classes_) > 2 else np.vstack([-model.coef_, model.coef_]) / 2
    bias[model.classes_] = model.intercept_ if len(model.classes_) > 2 else np.array([-1.0, 1.0]) * model.intercept_ / 2
    return LinearScorer(weights, bias)


def stratified_folds(labels: np.ndarray, n_folds: int) -> list[np.ndarray]:
    """Stratified fold index of every example: each category's examples dealt round-robin after a fixed shuffle."""
    rng = np.random.default_rng(SEED)
    fold_of = np.empty(len(labels), dtype=np.int64)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        rng.shuffle(members)
        fold_of[members] = np.arange(len(members)) % n_folds
    return [np.flatnonzero(fold_of == f) for f in range(n_folds)]


def _out_of_fold_logits(
    example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int, strength: float
) -> np.ndarray:
    n_folds = max(2, min(CV_FOLDS, int(np.bincount(labels).max())))
    logits = np.zeros((len(labels), n_categories))
    for held_out in stratified_folds(labels, n_folds):
        if not len(held_out):
            continue
        train = np.setdiff1d(np.arange(len(labels)), held_out)
        x, y = _training_set(example_vectors[train], labels[train], description_vectors)
        logits[held_out] = _fit_linear(x, y, n_categories, strength).scores(example_vectors[held_out])
    return logits


def _nll(probabilities: np.ndarray, labels: np.ndarray) -> float:
    return float(-np.log(np.clip(probabilities[np.arange(len(labels)), labels], 1e-12, 1.0)).mean())


def fit_linear(example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int) -> FittedScorer:
    """Strength by out-of-fold log loss (each at its own fitted temperature); then refit on everything."""
    best: tuple[float, float, float, np.ndarray] | None = None  # (nll, strength, temperature, logits)
    for strength in LINEAR_STRENGTHS:
        logits = _out_of_fold_logits(example_vectors, labels, description_vectors, n_categories, strength)
        temperature = fit_temperature(logits, labels, bounds=(1e-2, 10.0))
        nll = _nll(softmax(logits, temperature), labels)
        if best is None or nll < best[0]:
            best = (nll, strength, temperature, logits)
    assert best is not None
    _, strength, temperature, logits = best
    x, y = _training_set(example_vectors, labels, description_vectors)
    return FittedScorer(_fit_linear(x, y, n_categories, strength), temperature, logits, labels, "linear")


def fit_neighbours(
    example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int, prototype_weight: float = 0.0
) -> FittedScorer:
    scorer = NeighbourScorer(example_vectors, labels, description_vectors, n_categories, prototype_weight)
    scores = scorer.leave_one_out_scores()
    return FittedScorer(scorer, fit_temperature(scores, labels), scores, labels, "prototype" if prototype_weight else "neighbours")


def fit_ensemble(example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int) -> FittedScorer:
    members = (
        fit_linear(example_vectors, labels, description_vectors, n_categories),
        fit_neighbours(example_vectors, labels, description_vectors, n_categories, PROTOTYPE_WEIGHT),
    )
    # The members' own out-of-fold scores (k-fold logits, leave-one-out similarities) calibrate the blend.
    scores = np.mean([np.log(np.clip(softmax(m.out_of_fold, m.temperature), 1e-12, 1.0)) for m in members], axis=0)
    return FittedScorer(EnsembleScorer(members), fit_temperature(scores, labels, bounds=(1e-2, 10.0)), scores, labels, "ensemble")


def fit_auto(example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int) -> FittedScorer:
    """The candidate with the lowest out-of-fold log loss on the examples (ties: the earlier, cheaper one)."""
    fitted = [FITTERS[m](example_vectors, labels, description_vectors, n_categories) for m in AUTO_CANDIDATES]
    return min(fitted, key=lambda f: round(f.out_of_fold_log_loss, 6))


FITTERS: dict[ScoringMethod, Callable[[np.ndarray, np.ndarray, np.ndarray, int], FittedScorer]] = {
    "neighbours": fit_neighbours,
    "prototype": partial(fit_neighbours, prototype_weight=PROTOTYPE_WEIGHT),
    "linear": fit_linear,
    "ensemble": fit_ensemble,
    "auto": fit_auto,
}


def fit_scorer(
    method: ScoringMethod, example_vectors: np.ndarray, labels: np.ndarray, description_vectors: np.ndarray, n_categories: int
) -> FittedScorer:
    return FITTERS[method](example_vectors, labels, description_vectors, n_categories)
