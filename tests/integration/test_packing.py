"""Packed rows give the embeddings of texts run alone, on an encoder (MiniLM) and a decoder (Qwen3) alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mcp_classifier.engine import loading
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from tests.integration.test_batch_plan import MIXED_TEXTS, reference_vectors
from tests.support.tiny_models import build_tiny_qwen3


@pytest.fixture(scope="module")
def packed_minilm() -> TextEncoder:
    # rows of 24 tokens, eight texts a call, and a call costing 60 tokens (about what MiniLM measures on CPU)
    return TextEncoder.load(
        "builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8)
    )


@pytest.fixture(scope="module")
def packed_tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> TextEncoder:
    path: Path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-pack"))
    return TextEncoder.load(str(path), device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8))


@pytest.mark.parametrize("encoder_name", ["packed_minilm", "packed_tiny_qwen3"])
def test_packed_rows_give_each_texts_own_vector(encoder_name: str, request: pytest.FixtureRequest) -> None:
    """Mean pooling over a bidirectional mask (MiniLM) and last token over a causal one (Qwen3)."""
    encoder: TextEncoder = request.getfixturevalue(encoder_name)
    assert encoder.pack_width == 24  # the load-time check found packing exact for this model
    texts = MIXED_TEXTS * 2
    got = encoder.encode(texts)
    assert encoder.last_batch_packed
    assert encoder.last_forward_calls > 1  # more texts than one call takes
    np.testing.assert_allclose(got, reference_vectors(encoder, texts), atol=1e-5)


def test_mixed_lengths_are_packed_and_alike_lengths_stay_padded(packed_minilm: TextEncoder) -> None:
    """Packing where it saves padding; the length-sorted plan where lengths are alike and packing would only widen attention."""
    mixed = ["hi", "explain how the alliances of 1914 made a regional war spread across europe", "why", "thanks a lot"]
    got = packed_minilm.encode(mixed)
    assert packed_minilm.last_batch_packed
    np.testing.assert_allclose(got, reference_vectors(packed_minilm, mixed), atol=1e-5)
    alike = ["what is the capital of france", "what is the capital of spain", "what is the capital of italy"]
    got = packed_minilm.encode(alike)
    assert not packed_minilm.last_batch_packed
    np.testing.assert_allclose(got, reference_vectors(packed_minilm, alike), atol=1e-5)


class _CountsItsOwnPositions(torch.nn.Module):
    """A stand-in for an architecture that takes no position ids: the real model, positions left to it (0, 1, 2...)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, **inputs: Any) -> Any:
        inputs.pop("position_ids", None)
        return self.inner(**inputs)


def test_a_model_that_ignores_position_ids_falls_back_to_padding(monkeypatch: pytest.MonkeyPatch) -> None:
    auto_model = loading.AutoModel
    real_from_pretrained = auto_model.from_pretrained
    monkeypatch.setattr(auto_model, "from_pretrained", lambda *a, **k: _CountsItsOwnPositions(real_from_pretrained(*a, **k)))
    encoder = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=1.0, pack_width=64))
    assert encoder.pack_width == 0  # a text after another in a row got the wrong positions in the probe
    np.testing.assert_allclose(encoder.encode(MIXED_TEXTS), reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)
