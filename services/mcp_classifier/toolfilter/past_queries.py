"""What a tool's past requests add to its rank: requests that called it before, and example requests a caller sends.

A tool's description says what it does in the tool author's words; the requests that needed it say it in the
users'. So a tool may carry vectors of past requests (feedback from use, kept by the service; `examples` sent
with the tool), and its cosine to a new request is lifted towards its best cosine to one of them:

    lifted = cosine + weight * max(0, best past cosine - cosine)

- best, not mean: a tool used for several kinds of request keeps each of them; a mean would blur them all.
- lift only: a tool whose past requests resemble this one less than its description does keeps its own
  cosine, so history never ranks a tool below where its description puts it, and a tool with no history
  ranks exactly as without the feature.
- the result stays on the cosine scale (a mix of two cosines), so the threshold and the returned scores
  keep their meaning.

Measured with `eval-tools --feedback` (docs/tool-filter.md, "Feedback from use").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numpy as np


class PastQueries(NamedTuple):
    """Vectors of past requests for some tools of one list: rows grouped by tool, tools in ascending order."""

    vectors: np.ndarray  # (m, d) float32, unit length
    owners: np.ndarray  # (m,) int: the index in the caller's tool list of each row's tool, ascending


class PastQueryStore(Protocol):
    """Where feedback from use is kept (cache.tool_feedback.FeedbackVectors in the service): by tool id, vectors only."""

    async def past(self, tool_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """(vectors, owners) as PastQueries holds them, for the tools with these ids (in list order); None when none has any."""
        ...

    async def record(self, tool_ids: Sequence[str], vector: np.ndarray) -> bool:
        """Keep ``vector`` as a past request of each tool; False when the store could not keep it."""
        ...


def lift(cosines: np.ndarray, query_vectors: np.ndarray, past: PastQueries, weight: float) -> np.ndarray:
    """Each row's cosines (rows: the request, then its parts; a column per tool), lifted by the tools' past requests."""
    if weight <= 0 or not len(past.owners):
        return cosines
    # rows x past vectors; as (past x rows).T: OpenBLAS's few-rows-times-wide-matrix path ran 5-20x slower here
    similar = (past.vectors @ query_vectors.T).T
    tools, starts = np.unique(past.owners, return_index=True)
    best = np.maximum.reduceat(similar, starts, axis=1)  # rows x tools with history: the best past request
    lifted = cosines.copy()
    own = lifted[:, tools]
    lifted[:, tools] = own + weight * np.maximum(0.0, best - own)
    return lifted


def merged(first: PastQueries | None, second: PastQueries | None) -> PastQueries | None:
    """Both sets of past requests (kept feedback and sent examples), still grouped by tool in ascending order."""
    if first is None or not len(first.owners):
        return second
    if second is None or not len(second.owners):
        return first
    owners = np.concatenate([first.owners, second.owners])
    order = np.argsort(owners, kind="stable")
    return PastQueries(np.vstack([first.vectors, second.vectors])[order], owners[order])


def of_examples(examples: Sequence[Sequence[str]], vectors: np.ndarray) -> PastQueries | None:
    """The example requests of each tool (``examples[i]`` for tool i) as past requests; ``vectors`` in the same order."""
    owners = np.asarray([tool for tool, texts in enumerate(examples) for _ in texts], dtype=np.int64)
    return PastQueries(np.asarray(vectors, dtype=np.float32), owners) if len(owners) else None
