"""Splitting a mixed batch into the cheapest model calls: optimal, bounded, and invisible in the vectors."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from mcp_classifier.core.batch_plan import plan_sub_batches
from mcp_classifier.core.encoder import TextEncoder, pool

from .tiny_models import build_tiny_qwen3

MIXED_TEXTS = [
    "hi",
    "what is 2+2",
    "explain the causes of the first world war and how the alliances made it spread across europe in 1914",
    "why is the sky blue",
    "how do I sort a list in python by a key function and keep it stable when two keys are equal",
    "thanks!",
]


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


def reference_vectors(encoder: TextEncoder, texts: list[str]) -> np.ndarray:
    """One text per forward through the tokenizer's own call: no padding, no splitting, no sorting."""
    out = []
    for text in texts:
        batch = encoder.tokenizer([text], truncation=True, max_length=encoder.max_seq_length, return_tensors="pt")
        with torch.inference_mode():
            hidden = encoder.model(**batch).last_hidden_state
        vector = pool(hidden, batch["attention_mask"], encoder.pooling, left_padded=encoder.tokenizer.padding_side == "left")
        out.append(torch.nn.functional.normalize(vector.float(), dim=-1)[0].numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def minilm() -> TextEncoder:
    return TextEncoder("builtin:minilm", device="cpu", forward_overhead_tokens=1.0)


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> TextEncoder:
    path: Path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-plan"))
    return TextEncoder(str(path), device="cpu", forward_overhead_tokens=1.0)


@pytest.mark.parametrize("encoder_name", ["minilm", "tiny_qwen3"])
def test_split_and_hand_padded_batches_give_the_unbatched_vectors(encoder_name: str, request: pytest.FixtureRequest) -> None:
    """Right padding + mean pooling (MiniLM) and left padding + last token (Qwen3) alike."""
    encoder: TextEncoder = request.getfixturevalue(encoder_name)
    got = encoder.encode(MIXED_TEXTS)
    assert 1 < encoder.last_forward_calls < len(MIXED_TEXTS)  # split, yet some texts shared a padded call
    np.testing.assert_allclose(got, reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)


def test_measured_forward_overhead_is_a_usable_number(minilm: TextEncoder) -> None:
    overhead = minilm.measure_forward_overhead()
    assert 0.0 <= overhead <= minilm.batch_size * minilm.max_seq_length
