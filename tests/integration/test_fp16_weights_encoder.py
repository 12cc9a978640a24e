"""fp16 weights for small calls on a real MiniLM: lone queries answer as on fp32, large batches exactly so; the load checks.

The project's own labelled router queries (datasets/accuracy/router-traffic) against the packaged
default categories, each classified alone (one call of ~16 tokens: the fp16 weights' case).
Whether the copies are faster is a benchmark's claim (loadtests/bench_paths.py, docs/decisions/0012-fp16-weights-for-small-calls.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional

from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.engine.accel import fp16_weights
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

pytestmark = pytest.mark.skipif(not fp16_weights.fp16_weights_available(), reason="no fbgemm fp16 GEMM on this CPU")

QUERIES = Path(__file__).resolve().parents[2] / "datasets" / "accuracy" / "router-traffic" / "queries.jsonl"


@pytest.fixture(scope="module")
def classifier() -> Classifier:
    # A fixed, large forward cost: the planner then runs a call as one forward, so "a call over the limit" is one
    # forward over it. Measured at load (the default), a busy host's figure split the 32 texts below into
    # several forwards, and one of them, under the limit, rightly took the copies.
    return build_classifier(Settings(device="cpu", dtype="float32", fp16_weights_max_tokens=0, forward_overhead_tokens=100_000))


@pytest.fixture
def encoder(classifier: Classifier) -> Iterator[TextEncoder]:
    yield classifier.encoder
    classifier.encoder.drop_fp16_weights()


def swapped_limits(encoder: TextEncoder) -> set[int]:
    return {m._fp16_max_tokens for m in encoder.model.modules() if hasattr(m, "_fp16_packed_weight")}


@pytest.mark.timeout(1200)  # 240 lone calls: seconds on a quiet host, over 300 s on a 2-core host at load 8
def test_lone_queries_on_fp16_weights_get_the_fp32_categories(classifier: Classifier, encoder: TextEncoder) -> None:
    rows = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    texts, labels = [r["text"] for r in rows], [r["category"] for r in rows]
    # The fp32 reference in one call (its batches are far over the copies' limit); then each text alone on the copies.
    fp32 = classifier.classify(texts)
    assert encoder.use_fp16_weights(128) == 128
    assert swapped_limits(encoder) == {128}
    fp16 = [classifier.classify([text])[0] for text in texts]
    assert [r.category for r in fp16] == [r.category for r in fp32]
    assert [(r.model, r.use_reasoning) for r in fp16] == [(r.model, r.use_reasoning) for r in fp32]
    moved = np.array([abs(a.confidence - b.confidence) for a, b in zip(fp32, fp16)])
    assert 0 < moved.max() < 0.005  # the copies did run (rounding shows), and moved nothing that matters
    assert np.mean([r.category == label for r, label in zip(fp16, labels)]) >= 0.9


def test_calls_above_the_limit_stay_exactly_fp32(encoder: TextEncoder) -> None:
    rows = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    texts = [r["text"] for r in rows[:32]]  # one packed call of some 500 tokens
    before, lone_before = encoder.encode_queries(texts), encoder.encode_queries(texts[:1])
    assert encoder.use_fp16_weights(64) == 64
    assert np.array_equal(encoder.encode_queries(texts), before)
    lone = encoder.encode_queries(texts[:1])
    assert not np.array_equal(lone, lone_before) and float(lone[0] @ lone_before[0]) > 0.9999


def test_copies_that_change_embeddings_are_dropped(
    encoder: TextEncoder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def spoiled(self: torch.nn.Linear, inputs: torch.Tensor) -> torch.Tensor:  # a copy that lost the weights' signs
        return functional.linear(inputs, -self.weight, self.bias)

    monkeypatch.setattr(fp16_weights, "_small_call_forward", spoiled)
    with caplog.at_level(logging.WARNING, logger="mcp_classifier.engine.accel.verify"):
        assert encoder.use_fp16_weights(64) == 0
    assert swapped_limits(encoder) == set()
    assert "differ from the model's own" in caplog.text


def test_asking_again_sets_the_new_size_and_zero_is_fp32_throughout(encoder: TextEncoder) -> None:
    texts = ["what is the derivative of x squared"]
    fp32 = encoder.encode_queries(texts)
    encoder.use_fp16_weights(128)
    assert encoder.use_fp16_weights(16) == 16 and swapped_limits(encoder) == {16}
    assert not np.array_equal(encoder.encode_queries(texts), fp32)  # a lone query of under 16 tokens takes the copies
    encoder.drop_fp16_weights()
    assert encoder.fp16_weights_max_tokens == 0 and swapped_limits(encoder) == set()
    assert np.array_equal(encoder.encode_queries(texts), fp32)


def test_a_bf16_model_takes_no_copies() -> None:
    encoder = TextEncoder.load(
        "builtin:minilm", device="cpu", dtype="bfloat16", options=EngineOptions(forward_overhead_tokens=30.0, fp16_weights_max_tokens=64)
    )
    assert encoder.dtype is torch.bfloat16
    assert encoder.fp16_weights_max_tokens == 0
    assert not any(hasattr(m, "_fp16_packed_weight") for m in encoder.model.modules())
