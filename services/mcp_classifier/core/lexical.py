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


def zscores(scores: np.ndarray) -> np.ndarray:
    """Per row: how far each candidate stands above the others for this query, in the row's own spread."""
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    spread = scores.std(axis=1, keepdims=True)
    return (scores - scores.mean(axis=1, keepdims=True)) / np.maximum(spread, _SPREAD_FLOOR)


def bm25_index(documents: Sequence[list[str]]) -> BM25Okapi:
    return BM25Okapi([doc or [""] for doc in documents])  # rank-bm25 divides by zero on an empty document


def _category_index(documents: Sequence[list[str]]) -> BM25Plus:
    """BM25+ rather than Okapi: with a handful of documents (one per category) Okapi's IDF goes negative for
    any word in more than half of them, and then taking an example's words out of its own category
    (leave-one-out) would raise that category's score: a leak that makes meaningless words look useful.
    BM25+'s IDF, log((N + 1) / n), stays positive."""
    return BM25Plus([doc or [""] for doc in documents])


class CategoryLexicon:
    """One BM25 document per category: its name, its description and all its examples.

    Pooling a category's words into one document lets a query match any example's rare word, which
    is what a few-shot file needs: eight examples rarely share a query's exact phrasing.
    """

    def __init__(self, category_texts: Sequence[str], example_texts: Sequence[str], labels: np.ndarray) -> None:
        self.documents = self._documents(category_texts, example_texts, labels)
        self.index = _category_index(self.documents)
        self._example_words = [words(t) for t in example_texts]
        self._labels = labels

    @staticmethod
    def _documents(category_texts: Sequence[str], example_texts: Sequence[str], labels: np.ndarray) -> list[list[str]]:
        documents = [words(t) for t in category_texts]
        for text, label in zip(example_texts, labels):
            documents[int(label)].extend(words(text))
        return documents

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """(B, C) z-scored BM25 of each text against every category."""
        if not texts:
            return np.zeros((0, len(self.documents)))
        return zscores(np.array([self.index.get_scores(words(t)) for t in texts]))

    def leave_one_out(self) -> np.ndarray:
        """(N, C) each example's z-scores against the documents with its own words taken out.

        Rebuilding the index per example costs ~1 ms for a few hundred examples in five to fifteen
        documents: the honest out-of-fold figure the fusion weight is chosen on, paid once per load.
        """
        out = np.zeros((len(self._example_words), len(self.documents)))
        for i, (example, label) in enumerate(zip(self._example_words, self._labels)):
            documents = list(self.documents)
            own = list(documents[int(label)])
            for word in example:
                own.remove(word)
            documents[int(label)] = own
            out[i] = zscores(_category_index(documents).get_scores(example))[0]
        return out
