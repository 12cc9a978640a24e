"""Token matches: each query token's best match among a category's example tokens (late interaction, MaxSim).

A pooled sentence vector averages a query's words into one point; with eight examples a category, the
word that decides ("mitochondria", "escrow", "kubectl rollout") is often diluted by the rest. Matching
token vectors keeps each word, and unlike BM25 it matches a word's meaning, not its spelling: "refund"
meets "money back", "enzyme" meets "protein". Every category's examples and its name and description
pool their tokens into one bag, as BM25 pools their words into one document (core.lexical), so a query
may match any example's word.

Scores are z-scored per query, the same scale as BM25's, so the fusion (core.fusion) adds them to the
embedding scorer's log-probabilities with a weight chosen out of fold on the user's own examples.
Measured in docs/decisions/0023-token-matching.md.

Written by hand: late-interaction libraries (ColBERT, PyLate) index millions of passages with their
own models and compression; this is one matrix product against a few thousand token vectors of the
model already loaded, and a maximum per category. It runs in torch on the model's device, where the
query tokens already are: on a GPU the product is nearly free, and the tokens never cross to the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import torch

from .lexical import zscores

# A category's bag is summarised to this many token centroids where it holds more (a file with hundreds of
# examples a category): the per-query cost then stays that of a few-shot file. Measured on the default file
# (docs/decisions/0023-token-matching.md): 64 and 128 lose a point on the router sets, 256 keeps the accuracy of the whole bag
# at a fifth of its cost; few-shot files (about 100 tokens a category) stay whole.
TOKENS_PER_CATEGORY = 256
# Cosines come out of float32 products whose rounding differs by column (BLAS edge loops): equal matches
# can differ by ~1e-7, and z-scoring alone would blow that up to a whole standard deviation.
SPREAD_FLOOR = 1e-4
KMEANS_ITERATIONS = 20  # random starts, not k-means++: its seeding was 0.4 s a category, the whole fit 15 ms
NO_TOKENS = -1.0  # a category without tokens: the lowest cosine, never a neighbour's score

TokenSet: TypeAlias = np.ndarray | torch.Tensor  # one text's (tokens, d) unit vectors


def _as_array(tokens: TokenSet) -> np.ndarray:
    """Token vectors as a float32 array on the host (fitting runs there: k-means, folds)."""
    if isinstance(tokens, torch.Tensor):
        return tokens.detach().float().cpu().numpy()
    return np.asarray(tokens, dtype=np.float32)


def _summarise(tokens: np.ndarray, limit: int) -> np.ndarray:
    """At most ``limit`` unit vectors standing for ``tokens``: k-means centroids where there are more.

    A query token's best match then costs the same whatever the number of examples: a file with
    hundreds of examples a category repeats its words and phrasings, and their centroids keep them.
    """
    if not limit or len(tokens) <= limit:
        return tokens
    # Imported here: scikit-learn takes seconds to import, and a start whose fitted scorer comes from the start cache
    # builds no bags at all.
    from sklearn.cluster import KMeans

    centroids = KMeans(n_clusters=limit, init="random", n_init=1, max_iter=KMEANS_ITERATIONS, random_state=0).fit(tokens).cluster_centers_
    return (centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)).astype(np.float32)


class _Bag:
    """Each category's tokens in one padded block: (C, K, d) vectors and a (C, K) mask of the real ones."""

    def __init__(self, runs: Sequence[np.ndarray], dimensions: int, device: torch.device) -> None:
        width = max((len(r) for r in runs), default=0)
        vectors = np.zeros((len(runs), width, dimensions), dtype=np.float32)
        valid = np.zeros((len(runs), width), dtype=bool)
        for c, run in enumerate(runs):
            vectors[c, : len(run)] = run
            valid[c, : len(run)] = True
        self.vectors = torch.from_numpy(vectors).to(device)
        self.valid = torch.from_numpy(valid).to(device)
        self.size = int(valid.sum())

    @torch.inference_mode()
    def maxsim(self, query_tokens: Sequence[TokenSet]) -> np.ndarray:
        """(B, C): the mean over each query's tokens of its best cosine among each category's tokens."""
        n_categories, width, dimensions = self.vectors.shape
        out = np.zeros((len(query_tokens), n_categories))
        lengths = torch.tensor([len(q) for q in query_tokens], dtype=torch.long)
        if not len(query_tokens) or not int(lengths.sum()) or not self.size:
            return out
        device = self.vectors.device
        stacked = torch.cat([torch.as_tensor(q).to(device=device, dtype=torch.float32) for q in query_tokens if len(q)])
        sims = (stacked @ self.vectors.reshape(-1, dimensions).T).view(-1, n_categories, width)  # one product per batch
        best = sims.masked_fill(~self.valid, float("-inf")).amax(dim=2)
        best = torch.where(torch.isfinite(best), best, torch.full_like(best, NO_TOKENS))
        present = lengths > 0
        owner = torch.repeat_interleave(torch.arange(int(present.sum())), lengths[present]).to(device)
        sums = torch.zeros(int(present.sum()), n_categories, device=device).index_add_(0, owner, best)
        out[present.numpy()] = (sums / lengths[present].to(device).unsqueeze(1)).double().cpu().numpy()
        return out


class CategoryTokens:
    """One bag of token vectors per category: its name and description's tokens and all its examples'.

    Token sets may be arrays or tensors (on any device); fitting runs on the host, and the bag that
    scores queries lives on ``device``, beside the query tokens the encoder returns.
    """

    def __init__(
        self,
        category_tokens: Sequence[TokenSet],
        example_tokens: Sequence[TokenSet],
        labels: np.ndarray,
        tokens_per_category: int = TOKENS_PER_CATEGORY,
        device: torch.device | str = "cpu",
    ) -> None:
        self.tokens_per_category = tokens_per_category
        self.n_categories = len(category_tokens)
        self._category_tokens = [_as_array(t) for t in category_tokens]
        self._example_tokens = [_as_array(t) for t in example_tokens]
        self.dimensions = int(next((t.shape[1] for t in [*self._category_tokens, *self._example_tokens] if t.ndim == 2), 0))
        self._labels = np.asarray(labels, dtype=np.int64)
        self._bag = self._build(np.arange(len(self._labels)), torch.device(device))

    @property
    def size(self) -> int:
        return self._bag.size

    @property
    def bag(self) -> np.ndarray:
        """The scoring bag's real token vectors, category by category (for inspection and tests)."""
        return self._bag.vectors[self._bag.valid].cpu().numpy()

    def _build(self, keep: np.ndarray, device: torch.device) -> _Bag:
        runs = []
        for c in range(self.n_categories):
            mine = [self._category_tokens[c]] + [self._example_tokens[int(i)] for i in keep if self._labels[int(i)] == c]
            mine = [t for t in mine if len(t)]
            runs.append(_summarise(np.vstack(mine), self.tokens_per_category) if mine else np.zeros((0, self.dimensions), np.float32))
        return _Bag(runs, self.dimensions, device)

    def scores(self, query_tokens: Sequence[TokenSet]) -> np.ndarray:
        """(B, C) z-scored token matches of each query against every category."""
        if not len(query_tokens):
            return np.zeros((0, self.n_categories))
        return zscores(self._bag.maxsim(query_tokens), SPREAD_FLOOR)

    def out_of_fold(self, folds: Sequence[np.ndarray]) -> np.ndarray:
        """(N, C) each example's z-scores against bags built without its fold (the same folds as BM25's)."""
        out = np.zeros((len(self._labels), self.n_categories))
        everyone = np.arange(len(self._labels))
        for held_out in folds:
            if not len(held_out):
                continue
            bag = self._build(np.setdiff1d(everyone, held_out), torch.device("cpu"))
            out[held_out] = zscores(bag.maxsim([self._example_tokens[int(i)] for i in held_out]), SPREAD_FLOOR)
        return out
