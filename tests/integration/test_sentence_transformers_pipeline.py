"""A sentence-transformers model runs as its authors wrote it: every module modules.json lists, and its prompts.

The model is a tiny random BERT built here and saved by sentence-transformers itself, with two Dense
layers, a normalisation and named prompts; the reference is sentence-transformers' own ``encode``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer
from transformers import AutoTokenizer, BertConfig, BertModel

from mcp_classifier.classify.categories import load_categories
from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.engine.encoder import BUILTIN_MINILM, TextEncoder, resolve_model_path

TEXTS = ["how do I reset my password", "refund for a double charge on my card", "hi", "the app crashes when I upload a photo"]
QUERY_PROMPT, DOCUMENT_PROMPT = "query: ", "passage: "


def _save_pipeline(root: Path, pooling_mode: str) -> SentenceTransformer:
    torch.manual_seed(7)
    transformer_dir = root / "transformer"
    AutoTokenizer.from_pretrained(resolve_model_path(BUILTIN_MINILM)).save_pretrained(transformer_dir)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=128
    )
    BertModel(config).save_pretrained(transformer_dir)
    model = SentenceTransformer(
        modules=[
            Transformer(str(transformer_dir), max_seq_length=64),
            Pooling(32, pooling_mode=pooling_mode),
            Dense(32, 24, activation_function=torch.nn.Tanh()),
            Dense(24, 16, activation_function=torch.nn.Identity()),
            Normalize(),
        ],
        prompts={"query": QUERY_PROMPT, "document": DOCUMENT_PROMPT},
        device="cpu",
    )
    model.save(str(root / "model"))
    return model


@pytest.fixture(scope="module", params=["mean", "cls"])
def pipeline(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[SentenceTransformer, TextEncoder, Path]:
    root = tmp_path_factory.mktemp(f"st-{request.param}")
    reference = _save_pipeline(root, request.param)
    return reference, TextEncoder.load(str(root / "model"), device="cpu", max_seq_length=64), root / "model"


def test_query_embeddings_equal_sentence_transformers_own_encode_with_its_query_prompt(pipeline) -> None:
    reference, encoder, _ = pipeline
    expected = reference.encode(TEXTS, prompt_name="query", normalize_embeddings=True, convert_to_numpy=True)
    got = encoder.encode_queries(TEXTS)
    assert got.shape == (len(TEXTS), 16)  # the last Dense layer's width, not the transformer's 32
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_document_embeddings_take_the_document_prompt(pipeline) -> None:
    reference, encoder, _ = pipeline
    expected = reference.encode(TEXTS, prompt_name="document", normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(encoder.encode_documents(TEXTS), expected, atol=1e-5)
    # Without the prompt the embedding is another one: the prompt really is applied.
    bare = reference.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert not np.allclose(encoder.encode_documents(TEXTS), bare, atol=1e-3)


def test_the_pooling_the_authors_saved_is_the_one_used(pipeline) -> None:
    reference, encoder, _ = pipeline
    assert encoder.pooling == reference[1].pooling_mode


def test_the_classifier_embeds_and_classifies_through_the_whole_pipeline(pipeline, tmp_path: Path) -> None:
    """The tool filter's vectors are the model's own, and the category index is built in its 16 dimensions."""
    reference, encoder, _ = pipeline
    categories = tmp_path / "categories.yaml"
    categories.write_text(
        "categories:\n"
        "  - name: account\n    description: logins and passwords\n    examples: [reset my password, locked out of my account, change my login email]\n"
        "  - name: billing\n    description: charges and refunds\n    examples: [refund a charge, my invoice is wrong, cancel my plan]\n"
    )
    classifier = Classifier(encoder, load_categories(categories))
    expected = reference.encode(TEXTS, prompt_name="query", normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(classifier.embed(TEXTS, "query"), expected, atol=1e-5)
    results = classifier.classify(TEXTS)
    assert [r.category for r in results] and all(r.category in ("account", "billing") for r in results)
    assert all(abs(sum(r.probabilities) - 1.0) < 1e-5 for r in results)
