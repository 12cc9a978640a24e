"""Splitting a mixed batch into the cheapest model calls: optimal against brute force, bounded, clear on bad input.

The vectors the split produces are checked against unbatched ones in tests/integration/test_batch_plan.py.
"""

from __future__ import annotations

import itertools
import random

import pytest

from mcp_classifier.engine.batch_plan import plan_sub_batches


def cost(lengths: list[int], groups: list[slice], overhead: float) -> float:
    return sum(overhead + (g.stop - g.start) * lengths[g.stop - 1] for g in groups)


def brute_force_best(lengths: list[int], max_rows: int, overhead: float) -> float:
    """Every way of cutting the sorted list into contiguous groups, the cheapest one's cost."""
    n = len(lengths)
    best = float("inf")
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [n]
        groups = [slice(a, b) for a, b in zip(bounds, bounds[1:])]
        if all(g.stop - g.start <= max_rows for g in groups):
            best = min(best, cost(lengths, groups, overhead))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_plan_is_as_cheap_as_the_best_of_every_split(seed: int) -> None:
    rng = random.Random(seed)
    lengths = sorted(rng.randint(3, 120) for _ in range(rng.randint(1, 10)))
    max_rows, overhead = rng.randint(1, 6), rng.choice([0.0, 5.0, 40.0, 500.0])
    groups = plan_sub_batches(lengths, max_rows, overhead)
    assert [i for g in groups for i in range(g.start, g.stop)] == list(range(len(lengths)))  # every text once, in order
    assert all(g.stop - g.start <= max_rows for g in groups)
    assert cost(lengths, groups, overhead) == pytest.approx(brute_force_best(lengths, max_rows, overhead))


def test_expensive_calls_keep_the_batch_whole_and_free_calls_split_by_length() -> None:
    lengths = [5, 5, 6, 40, 41, 200]
    assert plan_sub_batches(lengths, 32, 1e9) == [slice(0, 6)]
    assert plan_sub_batches(lengths, 32, 0.0) == [slice(0, 2), slice(2, 3), slice(3, 4), slice(4, 5), slice(5, 6)]
    assert plan_sub_batches(lengths, 2, 1e9) == [slice(0, 2), slice(2, 4), slice(4, 6)]  # the row cap still holds


def test_bad_input_is_refused_clearly() -> None:
    assert plan_sub_batches([], 8, 10.0) == []
    with pytest.raises(ValueError, match="sorted"):
        plan_sub_batches([9, 3], 8, 10.0)
    with pytest.raises(ValueError, match="max_rows"):
        plan_sub_batches([3], 0, 10.0)
