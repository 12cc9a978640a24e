"""Packed rows give the embeddings of texts run alone, on an encoder (MiniLM) and a decoder (Qwen3) alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mcp_classifier.core.encoder import TextEncoder
from tests.integration.test_batch_plan import MIXED_TEXTS, reference_vectors
from tests.support.tiny_models import build_tiny_qwen3


@pytest.fixture(scope="module")
def packed_minilm() -> TextEncoder:
    # rows of 24 tokens and two rows a call: the mixed texts need several rows and several calls
    return TextEncoder("builtin:minilm", device="cpu", forward_overhead_tokens=1.0, pack_width=24, batch_size=2)


@pytest.fixture(scope="module")
def packed_tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> TextEncoder:
    path: Path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-pack"))
    return TextEncoder(str(path), device="cpu", forward_overhead_tokens=1.0, pack_width=24, batch_size=2)


@pytest.mark.parametrize("encoder_name", ["packed_minilm", "packed_tiny_qwen3"])
def test_packed_rows_give_each_texts_own_vector(encoder_name: str, request: pytest.FixtureRequest) -> None:
    """Mean pooling over a bidirectional mask (MiniLM) and last token over a causal one (Qwen3)."""
    encoder: TextEncoder = request.getfixturevalue(encoder_name)
    assert encoder.pack_width == 24  # the load-time check found packing exact for this model
    texts = MIXED_TEXTS * 2
    got = encoder.encode(texts)
    assert encoder.last_forward_calls > 1  # more rows than one call takes
    np.testing.assert_allclose(got, reference_vectors(encoder, texts), atol=1e-5)


def test_packing_shares_rows_and_calls(packed_minilm: TextEncoder) -> None:
    short = ["hi there", "thanks", "ok then", "why", "sure thing", "bye now"]
    packed_minilm.encode(short)
    assert packed_minilm.last_forward_calls == 1  # six short texts fit two rows of 24 tokens: one call


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
    auto_model = TextEncoder.__init__.__globals__["AutoModel"]
    real_from_pretrained = auto_model.from_pretrained
    monkeypatch.setattr(auto_model, "from_pretrained", lambda *a, **k: _CountsItsOwnPositions(real_from_pretrained(*a, **k)))
    encoder = TextEncoder("builtin:minilm", device="cpu", forward_overhead_tokens=1.0, pack_width=64)
    assert encoder.pack_width == 0  # a text after another in a row got the wrong positions in the probe
    np.testing.assert_allclose(encoder.encode(MIXED_TEXTS), reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)
