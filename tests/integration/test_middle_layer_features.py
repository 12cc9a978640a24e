"""Classification features: the last layer's embedding beside the middle layer's, on a real MiniLM.

The classifier's index and its queries see both layers; the tool filter and the Embed RPC keep the
model's own embedding, unchanged, so its vectors, caches and cosine thresholds mean what they did.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.engine.encoder import MiddleLayer, TextEncoder
from mcp_classifier.engine.options import EngineOptions
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier
from tests.integration.test_batch_plan import MIXED_TEXTS, reference_vectors
from tests.support.tiny_models import build_tiny_qwen3


def _encoder(middle_layer: MiddleLayer) -> TextEncoder:
    # rows of 24 tokens and eight texts a call, so the packed path runs over several calls
    return TextEncoder.load(
        "builtin:minilm",
        device="cpu",
        middle_layer=middle_layer,
        options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8),
    )


@pytest.fixture(scope="module")
def with_middle() -> TextEncoder:
    return _encoder("on")


@pytest.fixture(scope="module")
def last_only() -> TextEncoder:
    return _encoder("off")


def test_on_adds_the_middle_layer_and_off_keeps_the_last_alone(with_middle: TextEncoder, last_only: TextEncoder) -> None:
    assert with_middle.pooling == "mean" and with_middle.model.config.num_hidden_layers == 6
    assert with_middle.feature_layers == (-1, 3)
    assert with_middle.feature_dimensions == 2 * with_middle.dimensions == 768
    assert last_only.feature_layers == (-1,) and last_only.feature_dimensions == 384


@pytest.mark.parametrize(
    "texts", [MIXED_TEXTS * 2, ["alike length one", "alike length two"], ["a lone text"]], ids=["packed", "padded", "lone"]
)
def test_features_are_both_layers_pooled_side_by_side(with_middle: TextEncoder, texts: list[str]) -> None:
    """Whichever way the batch runs (packed rows, padded sub-batches, one text), each text gets its own two layers."""
    got = with_middle.encode(texts)
    expected = np.concatenate([reference_vectors(with_middle, texts), reference_vectors(with_middle, texts, layer=3)], axis=1) / np.sqrt(2)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert with_middle.last_batch_packed == (len(texts) > 2)


def test_the_embedding_part_is_the_models_own_embedding(with_middle: TextEncoder, last_only: TextEncoder) -> None:
    texts = MIXED_TEXTS
    own = reference_vectors(last_only, texts)
    np.testing.assert_allclose(with_middle.embedding_part(with_middle.encode_documents(texts)), own, atol=1e-5)
    np.testing.assert_allclose(last_only.embedding_part(last_only.encode_documents(texts)), own, atol=1e-5)


def test_tool_filter_vectors_stay_the_models_embedding_while_classification_uses_both() -> None:
    """The service as built from settings: `embed` (tool filter, Embed RPC) is unchanged by the setting."""
    both = build_classifier(Settings(middle_layer_features="on"))
    last = build_classifier(Settings())  # off by default
    texts = ["find flights to lisbon next week", "rotate the api keys of the staging cluster"]
    for kind in ("query", "document"):
        vectors = both.embed(texts, kind)
        assert vectors.shape == (2, 384) and vectors.dtype == np.float32
        np.testing.assert_allclose(vectors, last.embed(texts, kind), atol=1e-5)
    assert both.encoder.feature_layers == (-1, 3) and last.encoder.feature_layers == (-1,)
    assert [r.category for r in both.classify(texts)]  # classifies on the 768-wide features


def test_a_decoder_embedder_pools_its_middle_layer_the_same_way(tmp_path: Path) -> None:
    """Last-token pooling with left padding, at the middle layer too; its embedding part is the plain encoder's vector."""
    path = build_tiny_qwen3(tmp_path)
    plain = TextEncoder.load(str(path), device="cpu", options=EngineOptions(forward_overhead_tokens=1.0))
    assert plain.pooling == "last" and plain.feature_layers == (-1,)
    asked = TextEncoder.load(str(path), device="cpu", middle_layer="on", options=EngineOptions(forward_overhead_tokens=1.0))
    layers = asked.model.config.num_hidden_layers
    assert asked.feature_layers == (-1, layers // 2)
    texts = ["hi there", "a longer text than the first one"]
    features = asked.encode(texts)
    assert features.shape == (2, 2 * asked.dimensions)
    np.testing.assert_allclose(asked.embedding_part(features), plain.encode(texts), atol=1e-5)
