"""A second label for a query about two categories, read from its parts (classify/query_parts.py).

A query is about its second-ranked category too when two different parts of it, each on its own, pick
the two: each part's probability for its category is at least ``PART_PROBABILITY``, and the part is in
that category's scope. On the two-topic and one-topic queries of four deployments written for this
(docs/decisions/0045-second-labels-from-query-parts.md) it names both topics for 15 of 24 two-topic
queries and adds a second label to 16 of 216 one-topic ones, where the whole query's similarities named
both for 9 and added one to 43; on sets kept apart, both for 0.55 and one added to 0.11-0.20. A query that
joins its topics in one clause has no parts to read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .scope import IN_SCOPE_PROBABILITY

PART_PROBABILITY = 0.6  # a part picks a category when it holds this share of the part's probability


def part_label_mask(
    query_probabilities: np.ndarray, parts_of: Sequence[np.ndarray], part_probabilities: np.ndarray, part_in_scope: np.ndarray
) -> np.ndarray:
    """(B, C) whole-query probabilities, each query's rows of the parts' arrays, and the parts' (P, C) probabilities and
    per-category in-scope probabilities -> (B, C): the query's second-ranked category where two of its parts pick its
    first and second apart. The main category is the caller's; it is not set here."""
    mask = np.zeros(query_probabilities.shape, dtype=bool)
    if query_probabilities.shape[1] < 2:
        return mask
    picks = (part_probabilities >= PART_PROBABILITY) & (part_in_scope >= IN_SCOPE_PROBABILITY)
    order = np.argsort(-query_probabilities, axis=1)
    for row, rows in enumerate(parts_of):
        if len(rows) < 2:
            continue
        first, second = order[row, 0], order[row, 1]
        picks_first, picks_second = picks[rows, first], picks[rows, second]
        # Two different parts: one part alone cannot be about both (it picks one category past 0.5).
        mask[row, second] = bool(picks_first.any() and picks_second.any())
    return mask
