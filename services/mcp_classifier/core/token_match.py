"""Token matches: each query token's best match among a category's example tokens (late interaction, MaxSim).

A pooled sentence vector averages a query's words into one point; with eight examples a category, the
word that decides ("mitochondria", "escrow", "kubectl rollout") is often diluted by the rest. Matching
token vectors keeps each word, and unlike BM25 it matches a word's meaning, not its spelling: "refund"
meets "money back", "enzyme" meets "protein". Every category's examples and its name and description
pool their tokens into one bag, as BM25 pools their words into one document (core.lexical), so a query
may match any example's word.

Scores are z-scored per query, the same scale as BM25's, so the fusion (core.fusion) adds them to the
embedding scorer's log-probabilities with a weight chosen out of fold on the user's own examples.
Measured in docs/accuracy.

Written by hand: late-interaction libraries (ColBERT, PyLate) index millions of passages with their
own models and compression; this is one matrix product against a few thousand token vectors of the
model already loaded, and a maximum per category.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.cluster import KMeans

from .lexical import zscores

# A category's bag is summarised to this many token centroids where it holds more (a file with hundreds of
# examples a category): the per-query cost then stays that of a few-shot file. Measured on the default file
# (docs/accuracy): 64 and 128 lose a point on the router sets, 256 keeps the accuracy of the whole bag
# at a fifth of its cost; few-shot files (about 100 tokens a category) stay whole.
TOKENS_PER_CATEGORY = 256
# Cosines come out of float32 products whose rounding differs by column (BLAS edge loops): equal matches
# can differ by ~1e-7, and z-scoring alone would blow that up to a whole standard deviation.
SPREAD_FLOOR = 1e-4
KMEANS_ITERATIONS = 20  # random starts, not k-means++: its seeding was 0.4 s a category, the whole fit 15 ms


def _summarise(tokens: np.ndarray, limit: int) -> np.ndarray:
    """At most ``limit`` unit vectors standing for ``tokens``: k-means centroids where there are more.

    A query token's best match then costs the same whatever the number of examples: a file with
    hundreds of examples a category repeats its words and phrasings, and their centroids keep them.
    """
    if not limit or len(tokens) <= limit:
        return tokens
    centroids = KMeans(n_clusters=limit, init="random", n_init=1, max_iter=KMEANS_ITERATIONS, random_state=0).fit(tokens).cluster_centers_
    return (centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _bag(
    token_sets: Sequence[np.ndarray], owners: Sequence[int], n_categories: int, dimensions: int, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """All token vectors side by side, sorted by category (each summarised to ``limit``), and each category's count.

    A category with no tokens keeps an empty run; ``reduceat`` reads an empty run as its next
    token, so such runs are masked in ``_maxsim``.
    """
    owner_array = np.asarray(owners, dtype=np.int64)
    runs = []
    for c in range(n_categories):
        mine = [token_sets[int(i)] for i in np.flatnonzero(owner_array == c) if len(token_sets[int(i)])]
        runs.append(_summarise(np.vstack(mine).astype(np.float32), limit) if mine else np.zeros((0, dimensions), dtype=np.float32))
    counts = np.array([len(r) for r in runs], dtype=np.int64)
    return (np.vstack(runs) if runs else np.zeros((0, dimensions), dtype=np.float32)), counts


def _maxsim(query_tokens: Sequence[np.ndarray], bag: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, C): the mean over each query's tokens of its best cosine among each category's tokens."""
    n_categories = len(counts)
    out = np.zeros((len(query_tokens), n_categories))
    lengths = np.array([len(q) for q in query_tokens])
    if not len(query_tokens) or not lengths.sum() or not len(bag):
        return out
    stacked = np.vstack([q for q in query_tokens if len(q)]).astype(np.float32)
    sims = stacked @ bag.T  # one product for the whole batch: (query tokens, bag tokens)
    present = counts > 0
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[present]
    best = np.full((len(stacked), n_categories), -1.0, dtype=np.float32)
    best[:, present] = np.maximum.reduceat(sims, starts, axis=1)
    text_starts = np.concatenate([[0], np.cumsum(lengths[lengths > 0])[:-1]])
    out[lengths > 0] = np.add.reduceat(best, text_starts, axis=0) / lengths[lengths > 0, None]
    return out


class CategoryTokens:
    """One bag of token vectors per category: its name and description's tokens and all its examples'."""

    def __init__(
        self,
        category_tokens: Sequence[np.ndarray],
        example_tokens: Sequence[np.ndarray],
        labels: np.ndarray,
        tokens_per_category: int = TOKENS_PER_CATEGORY,
    ) -> None:
        self.tokens_per_category = tokens_per_category
        self.n_categories = len(category_tokens)
        self.dimensions = int(next((t.shape[1] for t in [*category_tokens, *example_tokens] if t.ndim == 2), 0))
        self._category_tokens = list(category_tokens)
        self._example_tokens = list(example_tokens)
        self._labels = np.asarray(labels, dtype=np.int64)
        self.bag, self.counts = self._build(np.arange(len(self._labels)))

    @property
    def size(self) -> int:
        return int(len(self.bag))

    def _build(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sets = self._category_tokens + [self._example_tokens[i] for i in keep]
        owners = list(range(self.n_categories)) + [int(self._labels[i]) for i in keep]
        return _bag(sets, owners, self.n_categories, self.dimensions, self.tokens_per_category)

    def scores(self, query_tokens: Sequence[np.ndarray]) -> np.ndarray:
        """(B, C) z-scored token matches of each query against every category."""
        return (
            zscores(_maxsim(query_tokens, self.bag, self.counts), SPREAD_FLOOR) if len(query_tokens) else np.zeros((0, self.n_categories))
        )

    def out_of_fold(self, folds: Sequence[np.ndarray]) -> np.ndarray:
        """(N, C) each example's z-scores against bags built without its fold (the same folds as BM25's)."""
        out = np.zeros((len(self._labels), self.n_categories))
        everyone = np.arange(len(self._labels))
        for held_out in folds:
            if not len(held_out):
                continue
            bag, counts = self._build(np.setdiff1d(everyone, held_out))
            out[held_out] = zscores(_maxsim([self._example_tokens[i] for i in held_out], bag, counts), SPREAD_FLOOR)
        return out
