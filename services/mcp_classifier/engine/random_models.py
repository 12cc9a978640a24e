"""Randomly initialised models with a published architecture, for throughput figures without the weights.

A forward's cost depends on the shapes (layers, widths, heads, sequence length), not on the values
of the weights, so a model built from the published config runs exactly as fast as the real one.
This is how GPU figures are taken where the weights cannot be downloaded (no internet on the GPU
host). The vectors it produces mean nothing: never serve real traffic with ``random:`` models.
"""

from __future__ import annotations

from typing import Any

RANDOM_PREFIX = "random:"
SEED = 0  # the same weights every start: two runs of a benchmark embed identically

# Qwen/Qwen3-Embedding-0.6B's config.json (the Qwen3-0.6B backbone with its 151,669-token vocabulary):
# 595,776,512 parameters, which a test checks.
ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen3-embedding-0.6b": {
        "model_type": "qwen3",
        "vocab_size": 151669,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "attention_bias": False,
    },
}


def is_random_model(model: str) -> bool:
    return model.startswith(RANDOM_PREFIX)


def random_model_config(model: str) -> Any:
    """The transformers config of ``random:<name>``; ValueError names the known architectures."""
    from transformers import AutoConfig

    name = model.removeprefix(RANDOM_PREFIX)
    if name not in ARCHITECTURES:
        raise ValueError(f"unknown random architecture {name!r}; known: {', '.join(RANDOM_PREFIX + n for n in ARCHITECTURES)}")
    fields = dict(ARCHITECTURES[name])
    return AutoConfig.for_model(fields.pop("model_type"), **fields)


def build_random_model(config: Any, dtype: Any, attn_implementation: str = "sdpa", device: Any = "cpu") -> Any:
    """The architecture of ``config`` (from random_model_config) with seeded random weights, built in ``dtype`` on ``device``.

    Initialised where it will run: on one CPU thread (a Ray replica's) drawing 0.6B random weights
    took ~40 s of the replica's start on the H100 host; on the GPU it is a fraction of a second.
    """
    import torch
    from transformers import AutoModel

    torch.manual_seed(SEED)
    with torch.device(device):
        return AutoModel.from_config(config, dtype=dtype, attn_implementation=attn_implementation)
