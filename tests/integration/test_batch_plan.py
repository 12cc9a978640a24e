"""Splitting a mixed batch into the cheapest model calls: optimal, bounded, and invisible in the vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mcp_classifier.engine.encoder import TextEncoder, pool
from mcp_classifier.engine.options import EngineOptions
from tests.support.tiny_models import build_tiny_qwen3

MIXED_TEXTS = [
    "hi",
    "what is 2+2",
    "explain the causes of the first world war and how the alliances made it spread across europe in 1914",
    "why is the sky blue",
    "how do I sort a list in python by a key function and keep it stable when two keys are equal",
    "thanks!",
]


def reference_vectors(encoder: TextEncoder, texts: list[str], layer: int | None = None) -> np.ndarray:
    """One text per forward through the tokenizer's own call: no padding, no splitting, no sorting.

    Pooled from the model's output, or from ``hidden_states[layer]`` when a layer is named.
    """
    out = []
    for text in texts:
        batch = encoder.tokenizer([text], truncation=True, max_length=encoder.max_seq_length, return_tensors="pt")
        with torch.inference_mode():
            output = encoder.model(**batch, output_hidden_states=layer is not None)
        hidden = output.last_hidden_state if layer is None else output.hidden_states[layer]
        vector = pool(hidden, batch["attention_mask"], encoder.pooling, left_padded=encoder.tokenizer.padding_side == "left")
        out.append(torch.nn.functional.normalize(vector.float(), dim=-1)[0].numpy())
    return np.stack(out)


@pytest.fixture(scope="module")
def minilm() -> TextEncoder:
    return TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=1.0))


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> TextEncoder:
    path: Path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-plan"))
    return TextEncoder.load(str(path), device="cpu", options=EngineOptions(forward_overhead_tokens=1.0))


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
