"""`random:` models: the published architecture exactly, without weights to download."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel

from mcp_classifier.engine.random_models import random_model_config


def test_random_qwen3_embedding_has_the_published_parameter_count() -> None:
    """Qwen3-Embedding-0.6B has 595,776,512 parameters (its model card's 0.6B); built on the meta device, no memory used."""
    config = random_model_config("random:qwen3-embedding-0.6b")
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == 595_776_512
    assert (config.model_type, config.hidden_size, config.num_hidden_layers) == ("qwen3", 1024, 28)


def test_an_unknown_random_architecture_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="random:qwen3-embedding-0.6b"):
        random_model_config("random:qwen9-huge")
