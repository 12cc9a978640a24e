"""Token vectors for token matching, from the same forward as the pooled ones, on a real MiniLM and a tiny Qwen3.

Each text must get its own tokens' last-layer vectors whichever way its batch runs (packed rows over
several calls, padded sub-batches, alone), and never the model's special tokens or a query's instruction.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcp_classifier.classify.categories import load_categories
from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from tests.integration.test_batch_plan import MIXED_TEXTS
from tests.support.tiny_models import build_tiny_qwen3

INSTRUCTION = "Given a user query, identify which topic category it belongs to"


@pytest.fixture(scope="module")
def minilm() -> TextEncoder:
    # rows of 24 tokens and eight texts a call, so the packed path runs over several calls
    return TextEncoder.load(
        "builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8)
    )


def alone_tokens(encoder: TextEncoder, text: str, skip: int = 0) -> np.ndarray:
    """The text through the tokenizer's own call and one forward: the tokens it did not add, after the first
    ``skip`` of the text itself, unit length."""
    batch = encoder.tokenizer([text], return_tensors="pt", return_special_tokens_mask=True)
    added = batch.pop("special_tokens_mask")[0].bool()
    with torch.inference_mode():
        hidden = encoder.model(**batch).last_hidden_state[0]
    lead = int(torch.nonzero(~added)[0])
    keep = ~added & (torch.arange(len(added)) >= lead + skip)
    return torch.nn.functional.normalize(hidden[keep].float(), dim=-1).numpy()


@pytest.mark.parametrize(
    "texts", [MIXED_TEXTS * 2, ["alike length one", "alike length two"], ["a lone text"]], ids=["packed", "padded", "lone"]
)
def test_each_text_gets_its_own_tokens_and_the_same_pooled_vector(minilm: TextEncoder, texts: list[str]) -> None:
    pooled, tokens = minilm.encode_with_tokens(texts, query=True)
    assert minilm.last_batch_packed == (len(texts) > 2)
    np.testing.assert_allclose(pooled, minilm.encode_queries(texts), atol=1e-6)
    assert len(tokens) == len(texts)
    for text, got in zip(texts, tokens):
        expected = alone_tokens(minilm, text)
        assert got.shape == expected.shape  # [CLS] and [SEP] left out, every word piece kept
        np.testing.assert_allclose(got, expected, atol=1e-4)


def test_no_texts_give_no_tokens(minilm: TextEncoder) -> None:
    pooled, tokens = minilm.encode_with_tokens([], query=True)
    assert pooled.shape == (0, 384) and tokens == []


def test_a_query_s_instruction_is_left_out_of_its_tokens(tmp_path_factory: pytest.TempPathFactory) -> None:
    qwen3 = TextEncoder.load(
        str(build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))),
        device="cpu",
        instruction=INSTRUCTION,
        options=EngineOptions(forward_overhead_tokens=1e9),
    )
    assert qwen3.query_prefix
    text = "how do transformers use attention"
    _, (as_document,) = qwen3.encode_with_tokens([text], query=False)
    as_query = qwen3.encode_with_tokens([text, "a longer text that pads the first one on the left"], query=True)[1][0]
    prefix = len(qwen3.tokenizer(qwen3.query_prefix, add_special_tokens=False)["input_ids"])
    expected = alone_tokens(qwen3, qwen3.format_query(text), skip=prefix)
    assert as_query.shape == expected.shape == (len(as_document), qwen3.dimensions)  # the text's own tokens, no instruction
    np.testing.assert_allclose(as_query, expected, atol=1e-4)


def test_the_default_file_scores_token_matches_and_off_scores_none(minilm: TextEncoder) -> None:
    config = load_categories(None)
    with_tokens = Classifier(minilm, config, token_matching="auto")
    without = Classifier(minilm, config, token_matching="off")
    assert "+tokens" in with_tokens.info.scoring and "+tokens" not in without.info.scoring
    # what /health reports: examples each scored without their fold; token matches must not make it worse
    assert with_tokens.info.loo_accuracy >= without.info.loo_accuracy
    queries = ["solve 3x + 4 = 19 for x", "my laptop won't connect to wifi", "what causes the seasons on earth"]
    assert [r.category for r in with_tokens.classify(queries)] == ["math", "technology", "science"]
