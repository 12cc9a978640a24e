"""Whether a query fits any category at all: per-category similarity thresholds and an in-scope probability.

A softmax over the user's categories always names one, however far the query is from all of them, so
"none of these" needs its own signal. Two similarities of the query say it:
- to its nearest category: the mean of its ``SCOPE_TOP_K`` most similar examples there, measured against
  what that category's own examples score when each is left out (so a tight category asks for more);
- to generic off-topic text: the same mean over the background set (chit-chat, other domains,
  instructions to the model, ``data/background_queries.yaml``) plus the file's ``out_of_scope_examples``.
A two-feature logistic regression turns them into the probability that the query is in scope, fitted
with the categories' own examples (left out one at a time) as positives and the off-topic texts (each
left out of the background it is compared with) as negatives. Background texts that sit as close to a
category as its own examples do are dropped first: for a deployment that owns chit-chat or trivia, they
are in scope. A category of fewer than ``SMALL_CATEGORY_EXAMPLES`` examples has too few to fit its own centre
and spread, and borrows them from a pooled prior (the file's larger categories, else the off-topic texts).

The classifier multiplies the category's probability by this one, so ``confidence`` stays the
probability that the answer is right, and an out-of-scope query's is low.

A broad file (many subject areas) takes a good share of the background set in scope itself: the set cannot speak
for its off-topic traffic, and the logistic's hedge, which on a deployment is what keeps leaked near misses from high
confidence, only costs its own traffic. Where the fit takes ``BROAD_FILE_BACKGROUND_SHARE`` or more of the off-topic
texts in scope, an in-scope answer's probability is read against the file's own examples' typical one (a query as
in scope as the file's typical example gets 1); the decision, and so out-of-scope recall, stays as fitted
(docs/decisions/0046).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

from .scope_stats import IN_SCOPE_PROBABILITY, ScopeStats
from .scoring import category_scores, top_k_mean

SCOPE_TOP_K = 2  # nearest examples averaged per category: one odd example neither makes nor breaks a match
OWN_LIKE_QUANTILE = 0.25  # background texts above this quantile of a category's own similarities count as its own
# A category with fewer examples than this has too few points to fit its own centre and spread from: left out one at a
# time, each of 3 examples is compared with the 2 others only (a query with all 3), so its centre comes out low, and the
# threshold with it. It borrows from a pooled prior as if it had this many, the missing ones from the pool.
SMALL_CATEGORY_EXAMPLES = 5
REGULARISATION = 1.0  # scikit-learn's C for the logistic: three parameters, hundreds of points
# A file whose fit takes this share of the packaged background in scope is broad: subject-area files take 0.23-0.44
# of it, deployments and small files 0-0.08 (docs/decisions/0046).
BROAD_FILE_BACKGROUND_SHARE = 0.15


@lru_cache(maxsize=1)
def background_queries() -> tuple[str, ...]:
    """The packaged generic off-topic queries, used only as negatives."""
    text = resources.files("mcp_classifier.data").joinpath("background_queries.yaml").read_text("utf-8")
    return tuple(yaml.safe_load(text)["queries"])


def category_similarities(
    query_vectors: np.ndarray, example_vectors: np.ndarray, labels: np.ndarray, description_sims: np.ndarray
) -> np.ndarray:
    """(B, C): each query's top-k mean similarity to each category's examples, the description left out (it
    stands in only for a category without examples)."""
    return category_scores(
        query_vectors @ example_vectors.T, labels, description_sims.shape[1], description_sims, SCOPE_TOP_K, description_weight=0.0
    )


@dataclass(frozen=True)
class ScopeModel:
    example_vectors: np.ndarray
    labels: np.ndarray
    description_vectors: np.ndarray
    background_vectors: np.ndarray  # (M, d) the off-topic texts kept as negatives
    centres: np.ndarray  # (C,) per category: the median similarity of its own examples, each left out
    weights: np.ndarray  # (2,) logistic weights on (similarity - centre, similarity - background similarity)
    bias: float
    stats: ScopeStats

    def in_scope_probability(self, query_vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(B, d) unit query vectors -> ((B,) probability of being in scope, (B, C) category similarities)."""
        sims = category_similarities(query_vectors, self.example_vectors, self.labels, query_vectors @ self.description_vectors.T)
        background = top_k_mean(query_vectors @ self.background_vectors.T, SCOPE_TOP_K)
        return self._probability(sims, background), sims

    def _probability(self, sims: np.ndarray, background: np.ndarray) -> np.ndarray:
        nearest = sims.argmax(axis=1)
        best = sims[np.arange(len(sims)), nearest]
        probability = 1.0 / (1.0 + np.exp(-(_features(sims, self.centres, background) @ self.weights + self.bias)))
        # A threshold the file sets decides alone: at or above it in scope, below it out, whatever the background says.
        overridden = np.asarray(self.stats.overridden, dtype=bool)[nearest] if self.stats.overridden else np.zeros(len(best), bool)
        if overridden.any():
            passed = best >= np.asarray(self.stats.thresholds)[nearest]
            probability = np.where(overridden & passed, np.maximum(probability, IN_SCOPE_PROBABILITY), probability)
            probability = np.where(overridden & ~passed, np.minimum(probability, np.nextafter(IN_SCOPE_PROBABILITY, 0.0)), probability)
        return self._read_against_typical(probability)

    def _read_against_typical(self, probability: np.ndarray) -> np.ndarray:
        """On a broad file, an in-scope probability divided by the file's typical one, capped at 1; it stays in scope
        (at least IN_SCOPE_PROBABILITY), and below that point nothing changes. Elsewhere as fitted."""
        typical = self.stats.typical_in_scope() if self.stats.broad else None  # on the hot path: a median only where used
        if typical is None:
            return probability
        lifted = np.clip(probability / typical, IN_SCOPE_PROBABILITY, 1.0)
        return np.where(probability >= IN_SCOPE_PROBABILITY, lifted, probability)

    def label_probabilities(self, query_vectors: np.ndarray, sims: np.ndarray) -> np.ndarray:
        """(B, d) unit query vectors and their (B, C) category similarities -> (B, C) per category, the probability
        that the query is in that category's scope: the fitted logistic read at that category rather than the
        nearest (at the nearest it is ``in_scope_probability``). Independent scores, for multi-label answers."""
        background = top_k_mean(query_vectors @ self.background_vectors.T, SCOPE_TOP_K)
        logits = self.weights[0] * (sims - self.centres[None, :]) + self.weights[1] * (sims - background[:, None]) + self.bias
        probability = 1.0 / (1.0 + np.exp(-logits))
        if any(self.stats.overridden):  # a threshold the file sets decides alone for its category, as for the nearest
            overridden = np.asarray(self.stats.overridden, dtype=bool)[None, :]
            passed = sims >= np.asarray(self.stats.thresholds)[None, :]
            probability = np.where(overridden & passed, np.maximum(probability, IN_SCOPE_PROBABILITY), probability)
            probability = np.where(overridden & ~passed, np.minimum(probability, np.nextafter(IN_SCOPE_PROBABILITY, 0.0)), probability)
        return self._read_against_typical(probability)


def fit_scope(
    example_vectors: np.ndarray,
    labels: np.ndarray,
    description_vectors: np.ndarray,
    negative_vectors: np.ndarray,
    overrides: tuple[float | None, ...] = (),
    background_from: int | None = 0,
) -> ScopeModel:
    """Fit the in-scope probability from the categories' examples and off-topic texts (docs/categories.md, in_scope).

    overrides: per category, a similarity threshold from the categories file that replaces the fitted one.
    background_from: where the packaged background starts among the negatives (the file's own come first); None
    without it, and then no file is judged broad.
    """
    from sklearn.linear_model import LogisticRegression

    n_categories = description_vectors.shape[0]
    overrides = overrides or (None,) * n_categories
    # Positives: each example against its own category without itself, and the other categories as they are.
    example_sims = example_vectors @ example_vectors.T
    np.fill_diagonal(example_sims, -np.inf)
    description_sims = example_vectors @ description_vectors.T
    own = category_scores(example_sims, labels, n_categories, description_sims, SCOPE_TOP_K, description_weight=0.0)
    lone = np.flatnonzero(np.bincount(labels, minlength=n_categories) == 1)
    for c in lone:  # a lone example has nothing left to compare with but its description
        own[labels == c, c] = description_sims[labels == c, c]
    centres, floors = _own_spread(own[np.arange(len(labels)), labels], labels, n_categories, negative_vectors)
    # Negatives: drop the off-topic texts that sit as close to a category as its own examples do.
    negative_sims = category_similarities(negative_vectors, example_vectors, labels, negative_vectors @ description_vectors.T)
    kept = ~(negative_sims >= floors[None, :]).any(axis=1)
    negatives, negative_sims = negative_vectors[kept], negative_sims[kept]
    negative_to_negative = negatives @ negatives.T
    np.fill_diagonal(negative_to_negative, -np.inf)  # each off-topic text left out of the background it is compared with
    background_of_negatives = top_k_mean(negative_to_negative, SCOPE_TOP_K)
    background_of_examples = top_k_mean(example_vectors @ negatives.T, SCOPE_TOP_K)
    features_pos = _features(own, centres, background_of_examples)
    features_neg = _features(negative_sims, centres, background_of_negatives)
    x = np.vstack([features_pos, features_neg])
    y = np.concatenate([np.ones(len(features_pos)), np.zeros(len(features_neg))])
    if len(features_neg) == 0:  # nothing off-topic to learn from: in scope from half a spread below the centre
        weights, bias = np.array([20.0, 0.0]), 1.0
    else:
        model = LogisticRegression(C=REGULARISATION, class_weight="balanced", max_iter=1000).fit(x, y)
        weights, bias = model.coef_[0].astype(np.float64), float(model.intercept_[0])
    # The similarity at which a category's query is even, its background similarity at the positives' median.
    typical_gap = float(np.median(features_pos[:, 1])) if len(features_pos) else 0.0
    fitted = centres + (-bias - weights[1] * typical_gap) / max(weights[0] + weights[1], 1e-6)
    thresholds = np.array([o if o is not None else t for o, t in zip(overrides, fitted)], dtype=np.float64)
    # An override moves that category's centre so its even point lands on the threshold the file gives.
    centres = centres + (thresholds - fitted)
    overridden = tuple(o is not None for o in overrides)
    partial_stats = ScopeStats(tuple(float(t) for t in thresholds), (), 0.0, 0, overridden)  # what _probability reads
    probe = ScopeModel(example_vectors, labels, description_vectors, negatives, centres, weights, bias, partial_stats)
    positive_p = probe._probability(own, background_of_examples)
    negative_p = probe._probability(negative_sims, background_of_negatives) if len(negatives) else np.zeros(0)
    # The share of the packaged background, its texts dropped as a category's own included, that the fit takes in
    # scope: a fixed reference set, so one share tells a broad file whatever the file adds of its own.
    taken = np.ones(len(negative_vectors), dtype=bool)  # a dropped text sits as close as a category's own examples
    taken[kept] = negative_p >= IN_SCOPE_PROBABILITY
    if (~kept).any() and len(negatives):
        taken[~kept] = probe.in_scope_probability(negative_vectors[~kept])[0] >= IN_SCOPE_PROBABILITY
    reference = taken[background_from:] if background_from is not None else taken[:0]
    background_in_scope = float(reference.mean()) if len(reference) else 0.0
    stats = ScopeStats(
        thresholds=tuple(float(t) for t in thresholds),
        coverage=tuple(
            float((positive_p[labels == c] >= IN_SCOPE_PROBABILITY).mean()) if (labels == c).any() else 1.0 for c in range(n_categories)
        ),
        out_of_scope_recall=float((negative_p < IN_SCOPE_PROBABILITY).mean()) if len(negative_p) else 0.0,
        negatives=int(len(negatives)),
        overridden=overridden,
        leaks=_leaks(negative_sims, negative_p, n_categories),
        typical=tuple(float(np.median(positive_p[labels == c])) if (labels == c).any() else 1.0 for c in range(n_categories)),
        background_in_scope=background_in_scope,
        broad=background_in_scope >= BROAD_FILE_BACKGROUND_SHARE,
    )
    return ScopeModel(example_vectors, labels, description_vectors, negatives, centres, weights, bias, stats)


def _own_spread(
    own_of_label: np.ndarray, labels: np.ndarray, n_categories: int, negative_vectors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per category, the centre (median) of its own examples' similarities, each left out, and the floor
    (OWN_LIKE_QUANTILE) under which text stops looking like its own. A category with fewer than
    SMALL_CATEGORY_EXAMPLES examples is filled up to that many with the pooled prior (_pooled_prior):
    two or three points fit a threshold that means nothing."""
    counts = np.bincount(labels, minlength=n_categories)
    # A category without examples is judged by its description; it keeps the median of every example as its centre.
    own_centres = np.array([float(np.median(own_of_label[labels == c] if counts[c] else own_of_label)) for c in range(n_categories)])
    own_spreads = np.array(
        [
            own_centres[c] - float(np.quantile(own_of_label[labels == c], OWN_LIKE_QUANTILE)) if counts[c] else 0.0
            for c in range(n_categories)
        ]
    )
    prior_centre, prior_spread = _pooled_prior(own_centres, own_spreads, counts, negative_vectors)
    own_share = np.where(counts > 0, np.minimum(counts, SMALL_CATEGORY_EXAMPLES) / SMALL_CATEGORY_EXAMPLES, 1.0)
    centres = own_share * own_centres + (1.0 - own_share) * prior_centre
    floors = np.where(counts > 0, centres - (own_share * own_spreads + (1.0 - own_share) * prior_spread), np.inf)
    return centres, floors


def _pooled_prior(centres: np.ndarray, spreads: np.ndarray, counts: np.ndarray, negative_vectors: np.ndarray) -> tuple[float, float]:
    """(centre, spread) a small category borrows: the file's categories of SMALL_CATEGORY_EXAMPLES examples or more,
    weighted by their example counts. Where every category is small, their own figures are biased low alike, so the
    prior comes from the off-topic texts: how similar each is to its nearest others, which on the project's sets is
    about what a category of 8 examples shows (a median of 0.37 against 0.13-0.53 for builtin:minilm). Without
    either, the small categories' own figures, pooled."""
    large = counts >= SMALL_CATEGORY_EXAMPLES
    if large.any():
        return float(np.average(centres[large], weights=counts[large])), float(np.average(spreads[large], weights=counts[large]))
    if len(negative_vectors) > SCOPE_TOP_K:
        among = negative_vectors @ negative_vectors.T
        np.fill_diagonal(among, -np.inf)
        nearest = top_k_mean(among, SCOPE_TOP_K)
        median = float(np.median(nearest))
        return median, median - float(np.quantile(nearest, OWN_LIKE_QUANTILE))
    present = counts > 0
    if not present.any():
        return 0.0, 0.0
    return float(np.average(centres[present], weights=counts[present])), float(np.average(spreads[present], weights=counts[present]))


def _leaks(negative_sims: np.ndarray, negative_p: np.ndarray, n_categories: int) -> tuple[float, ...]:
    """Per category: of the off-topic texts nearest to it, the share judged in scope."""
    if not len(negative_p):
        return (0.0,) * n_categories
    nearest = negative_sims.argmax(axis=1)
    leaked = negative_p >= IN_SCOPE_PROBABILITY
    return tuple(float(leaked[nearest == c].mean()) if (nearest == c).any() else 0.0 for c in range(n_categories))


def _features(sims: np.ndarray, centres: np.ndarray, background: np.ndarray) -> np.ndarray:
    nearest = sims.argmax(axis=1)
    best = sims[np.arange(len(sims)), nearest]
    return np.stack([best - centres[nearest], best - background], axis=1)
