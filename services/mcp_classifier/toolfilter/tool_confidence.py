"""How sure the filter is that a request needs each tool it kept: a probability, beside the cosine.

A cosine says how alike two texts are on the model's own scale, not whether the tool is needed: MiniLM gives a
needed tool anything from 0.1 to 0.7. Where a tool stands in this list says more: its hybrid key (z units of this
request's scores), how far it sits below the first tool's key, and its place in the order. A logistic over those,
plus whether the request has several asks (query_clauses: more of its tools are needed), is the confidence.

The coefficients were fitted on the top ten tools of every request of the project's development tool sets (dev,
blind-1 to blind-4, platform and its two-tool requests: 18,570 tools) and checked on `heldout`: ECE 0.019, AUROC
0.933 (docs/decisions/0044-tool-confidence-and-needs.md; `eval-tools` prints the table on any set). The features
are in each request's own spread, not the model's cosine scale, so they carry to another model better than a
cosine would; `eval-tools` on a caller's own tools says how well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tool_ranking import Ranked, ToolRanking


@dataclass(frozen=True)
class ConfidenceFit:
    """Logistic coefficients: the tool's key, its gap below the first key, log(1 + its place), several asks."""

    key: float
    gap: float
    place: float
    asks: float
    bias: float


# Fitted with scikit-learn's LogisticRegression (C=1) as the docstring says; the embedding order is fitted on its own
# rows (the whole request's cosine z-scores), where a request's parts are not ranked.
FITS: dict[ToolRanking, ConfidenceFit] = {
    "hybrid": ConfidenceFit(key=0.548, gap=-0.711, place=-1.632, asks=0.406, bias=-1.411),
    "embedding": ConfidenceFit(key=0.502, gap=-1.052, place=-1.020, asks=0.0, bias=-1.627),
}


def tool_confidences(ranked: Ranked, asks: int, ranking: ToolRanking) -> np.ndarray:
    """The probability that the request needs each tool, by tool index (the caller's list order).

    ``ranked``: the order and keys the tools were ranked with; ``asks``: the separate asks found in the request.
    """
    fit = FITS[ranking]
    keys = np.asarray(ranked.keys, dtype=np.float64)
    if not len(ranked.order):
        return keys
    places = np.empty(len(keys))
    places[ranked.order] = np.arange(len(ranked.order))
    top = keys[ranked.order[0]]
    logit = fit.key * keys + fit.gap * (top - keys) + fit.place * np.log1p(places) + fit.asks * (asks > 1) + fit.bias
    return 1.0 / (1.0 + np.exp(-logit))
