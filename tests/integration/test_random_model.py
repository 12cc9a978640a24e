"""`--model random:qwen3-embedding-0.6b` loads offline and embeds like the real model's shapes: last-token pooling,
1024 dimensions, the query instruction on; the warning says its vectors mean nothing."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions

pytestmark = pytest.mark.slow


def test_the_random_qwen3_architecture_embeds_offline_like_the_real_one(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        encoder = TextEncoder.load(
            "random:qwen3-embedding-0.6b", device="cpu", instruction="Classify the query", options=EngineOptions(forward_overhead_tokens=50)
        )
    assert "RANDOM weights" in caplog.text
    assert (encoder.pooling, encoder.dimensions, encoder.tokenizer.padding_side) == ("last", 1024, "left")
    assert encoder.query_prefix.startswith("Instruct: Classify the query")
    vectors = encoder.encode_queries(["how do I deploy a cluster", "what is the derivative of sine"])
    assert vectors.shape == (2, 1024) and np.all(np.isfinite(vectors))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
