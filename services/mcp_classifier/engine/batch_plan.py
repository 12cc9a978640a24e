"""Splitting one batch of texts into the model calls that cost least.

A batch formed from live traffic mixes short and long queries. Padded to its longest text, it
wastes most of its compute on padding (on this project's 2-core box random batches of 16 ran at
~70% of the length-sorted rate); split into one call per length, it pays the fixed cost of a
forward (Python, kernel launches) many times over. The model's cost is close to
``overhead + rows * longest_row`` (in tokens), so the cheapest split of the length-sorted texts
into contiguous groups is a small dynamic programme. It is the product's own scheduling logic,
so it is written here rather than taken from a library.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def plan_sub_batches(sorted_lengths: Sequence[int], max_rows: int, overhead_tokens: float) -> list[slice]:
    """Cheapest split of ascending token counts into contiguous groups of at most `max_rows`.

    Cost of a group = `overhead_tokens` + rows x its longest length. O(n * max_rows) additions, in n
    numpy passes: ~10 ms for 1,024 texts, nothing next to one forward for a batch of 32.
    """
    n = len(sorted_lengths)
    if n == 0:
        return []
    if max_rows < 1:
        raise ValueError("max_rows must be at least 1")
    if any(b < a for a, b in zip(sorted_lengths, sorted_lengths[1:])):
        raise ValueError("lengths must be sorted ascending")
    lengths = np.asarray(sorted_lengths, dtype=np.float64)
    best = np.zeros(n + 1)  # best[j]: cheapest cost of the first j texts
    start_of_last = np.zeros(n + 1, dtype=np.int64)
    # The inner choice (where the last group starts) is one numpy pass per text: the Python double loop
    # took ~50 ms for 1,024 texts in groups of up to 512, longer than a GPU forward of them.
    for end in range(1, n + 1):
        starts = np.arange(max(0, end - max_rows), end)
        costs = best[starts] + overhead_tokens + (end - starts) * lengths[end - 1]  # sorted: the group's last text is its longest
        pick = int(np.argmin(costs))  # the first of equal costs, as a strict "<" scan would keep
        best[end] = costs[pick]
        start_of_last[end] = starts[pick]
    groups: list[slice] = []
    end = n
    while end > 0:
        start = int(start_of_last[end])
        groups.append(slice(start, end))
        end = start
    groups.reverse()
    return groups


def plan_cost(sorted_lengths: Sequence[int], groups: Sequence[slice], overhead_tokens: float) -> float:
    """The cost `plan_sub_batches` minimises, of the given groups: to weigh a plan against packing."""
    return sum(overhead_tokens + (g.stop - g.start) * sorted_lengths[g.stop - 1] for g in groups)
