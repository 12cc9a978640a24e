"""Word matches: BM25 (rank-bm25) over short texts, as per-query z-scores an embedding score can be added to.

A small sentence encoder blurs the rare, exact words that pick a tool or a category ("VAT", "kubectl",
"SN2", a product name). BM25 catches them; z-scores put its scores on the scale of the query's own
spread, so they can be added to cosine scores or log-probabilities with one weight.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rank_bm25 import BM25Okapi, BM25Plus

_WORD = re.compile(r"[a-z0-9]+")
_SPREAD_FLOOR = 1e-9  # a query whose scores are all equal has no order to add: its z-scores are 0


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def zscores(scores: np.ndarray, spread_floor: float = _SPREAD_FLOOR) -> np.ndarray:
    """Per row: how far each candidate stands above the others for this query, in the row's own spread.

    A row whose spread is under ``spread_floor`` is divided by the floor instead: its differences are
    rounding, not an order worth adding.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    spread = scores.std(axis=1, keepdims=True)
    return (scores - scores.mean(axis=1, keepdims=True)) / np.maximum(spread, spread_floor)


def zscores_like(values: np.ndarray, reference: np.ndarray, spread_floor: float = _SPREAD_FLOOR) -> np.ndarray:
    """``values`` in the z units of ``reference`` (its rows' mean and spread): an entry equal to the reference's keeps
    exactly its z-score, whatever the other entries became (the tool filter's past requests lift only some tools)."""
    reference = np.atleast_2d(np.asarray(reference, dtype=np.float64))
    spread = np.maximum(reference.std(axis=1, keepdims=True), spread_floor)
    return (np.atleast_2d(np.asarray(values, dtype=np.float64)) - reference.mean(axis=1, keepdims=True)) / spread


def bm25_index(documents: Sequence[list[str]]) -> BM25Okapi:
    return BM25Okapi([doc or [""] for doc in documents])  # rank-bm25 divides by zero on an empty document


def _category_index(documents: Sequence[list[str]]) -> BM25Plus:
    """BM25+ rather than Okapi: with a handful of documents (one per category) Okapi's IDF goes negative for
    any word in more than half of them, and then taking an example's words out of its own category
    (out of fold) would raise that category's score: a leak that makes meaningless words look useful.
    BM25+'s IDF, log((N + 1) / n), stays positive."""
    return BM25Plus([doc or [""] for doc in documents])


class CategoryLexicon:
    """One BM25 document per category: its name, its description and all its examples.

    Pooling a category's words into one document lets a query match any example's rare word, which
    is what a few-shot file needs: eight examples rarely share a query's exact phrasing.
    """

    def __init__(self, category_texts: Sequence[str], example_texts: Sequence[str], labels: np.ndarray) -> None:
        self._category_words = [words(t) for t in category_texts]
        self._example_words = [words(t) for t in example_texts]
        self._labels = labels
        self.documents = [list(d) for d in self._category_words]
        for example, label in zip(self._example_words, labels):
            self.documents[int(label)].extend(example)
        self.index = _category_index(self.documents)
        # Each word's scores against every category, asked of rank-bm25 once per word of the vocabulary:
        # a query's scores are then the sum over its words, with no per-query Python loop over
        # documents (rank-bm25 scores one query at a time: 10 ms for a batch of 32, now well under 1 ms).
        self._word_scores = {w: self.index.get_scores([w]) for w in {w for d in self.documents for w in d}}
        self._no_match = np.zeros(len(self.documents))

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """(B, C) z-scored BM25 of each text against every category."""
        if not texts:
            return np.zeros((0, len(self.documents)))
        rows = [sum((self._word_scores.get(w, self._no_match) for w in words(t)), self._no_match) for t in texts]
        return zscores(np.array(rows))

    def out_of_fold(self, folds: Sequence[np.ndarray]) -> np.ndarray:
        """(N, C) each example's z-scores against documents built without its fold.

        Folds rather than leave-one-out: one index per fold keeps the cost linear in the examples
        (leave-one-out rebuilds every document per example: minutes for a file of thousands).
        """
        out = np.zeros((len(self._example_words), len(self.documents)))
        for held_out in folds:
            if not len(held_out):
                continue
            keep = np.setdiff1d(np.arange(len(self._labels)), held_out)
            documents = [list(d) for d in self._category_words]
            for i in keep:
                documents[int(self._labels[i])].extend(self._example_words[i])
            index = _category_index(documents)
            out[held_out] = zscores(np.array([index.get_scores(self._example_words[i]) for i in held_out]))
        return out
