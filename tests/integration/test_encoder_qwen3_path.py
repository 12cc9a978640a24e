"""The Qwen3-Embedding path on a tiny Qwen3 built in the session: left padding, last token, instruction on queries only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.classify.categories import load_categories
from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.engine.encoder import TextEncoder, detect_pooling, resolve_model_path
from mcp_classifier.engine.options import EngineOptions
from tests.support.tiny_models import build_tiny_qwen3

INSTRUCTION = "Given a user query, identify which topic category it belongs to"


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def encoder(qwen3_dir: Path) -> TextEncoder:
    # A forward "costs" more than any padding here, so every batch stays one padded model call.
    return TextEncoder.load(
        str(qwen3_dir), device="cpu", instruction=INSTRUCTION, options=EngineOptions(batch_size=8, forward_overhead_tokens=1e9)
    )


def test_decoder_model_gets_last_token_pooling_and_left_padding(encoder: TextEncoder) -> None:
    assert encoder.pooling == "last"
    assert encoder.tokenizer.padding_side == "left"
    assert encoder.info.instruction_on_queries


def test_vector_is_the_same_alone_and_batched_with_longer_texts(encoder: TextEncoder) -> None:
    short = "hello there"
    longer = [
        "explain the causes of the first world war and how the alliances made it spread across europe",
        "how do I sort a list in python by a key function and keep it stable",
    ]
    alone = encoder.encode([short])[0]
    batched = encoder.encode([longer[0], short, longer[1]])[1]
    assert encoder.last_forward_calls == 1  # one model call for all three ...
    assert encoder.token_counts([short])[0] < min(encoder.token_counts(longer))  # ... so the short one was padded
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_without_masking_the_padding_the_vector_would_differ(encoder: TextEncoder) -> None:
    """Guards the test above: right padding with position -1 pooling gives a different vector."""
    import torch

    texts = ["hello there", "explain the causes of the first world war and how the alliances spread"]
    encoder.tokenizer.padding_side = "right"
    try:
        batch = encoder.tokenizer(texts, padding=True, return_tensors="pt")
        with torch.inference_mode():
            wrong = encoder.model(**batch).last_hidden_state[0, -1]
    finally:
        encoder.tokenizer.padding_side = "left"
    right = encoder.encode([texts[0]])[0]
    wrong_n = torch.nn.functional.normalize(wrong.float(), dim=-1).numpy()
    assert not np.allclose(right, wrong_n, atol=1e-3)


def test_instruction_goes_on_queries_only(encoder: TextEncoder) -> None:
    text = "why is the sky blue during the day"
    query = encoder.encode_queries([text])[0]
    document = encoder.encode_documents([text])[0]
    prefixed = encoder.encode([f"Instruct: {INSTRUCTION}\nQuery:{text}"])[0]
    np.testing.assert_allclose(query, prefixed, atol=1e-6)
    assert not np.allclose(query, document, atol=1e-3)


def test_category_index_embeds_examples_as_documents(encoder: TextEncoder) -> None:
    config = load_categories()
    classifier = Classifier(encoder, config)
    first_examples = list(config.categories[0].examples[:3])
    index = classifier._state[1]
    np.testing.assert_allclose(index.example_vectors[:3], encoder.encode_documents(first_examples), atol=1e-5)
    (result,) = classifier.classify(["what is the derivative of a polynomial"])
    assert abs(sum(result.probabilities) - 1.0) < 1e-6


def test_sentence_transformers_dir_uses_its_pooling_config() -> None:
    from transformers import AutoConfig

    path = resolve_model_path("builtin:minilm")
    assert detect_pooling(path, AutoConfig.from_pretrained(path)) == "mean"


def test_cls_pooling_is_read_from_pooling_config(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text('[{"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]')
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}')
    assert detect_pooling(str(tmp_path), object()) == "cls"
