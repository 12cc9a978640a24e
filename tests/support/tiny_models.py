"""Builds a tiny Qwen3 (random weights, BPE tokenizer trained here) so the Qwen3 path runs with no download."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CORPUS = [
    "what is the derivative of a polynomial",
    "explain the causes of the first world war",
    "how do I sort a list in python",
    "why is the sky blue during the day",
    "hello there how are you",
    "integrate the function over the interval",
    "who built the pyramids of giza",
    "configure a kubernetes cluster",
    "photosynthesis turns light into chemical energy",
    "tell me a joke about cats",
    "Instruct: Query:",
] * 20


def build_tiny_qwen3(target: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<|endoftext|>"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    # Qwen3-Embedding appends <|endoftext|> to every text; the last-token pooling reads it.
    eos_id = tokenizer.token_to_id("<|endoftext|>")
    tokenizer.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", eos_id)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<|endoftext|>", pad_token="<|endoftext|>", padding_side="left"
    )
    config = Qwen3Config(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        pad_token_id=eos_id,
        eos_token_id=eos_id,
    )
    model = Qwen3Model(config).eval()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    fast.save_pretrained(target)
    return target


def tiny_qwen3_model(layers: int = 3) -> Any:
    """A Qwen3Model of a few tiny layers in memory, seeded, in eval mode: for tests that swap or compile its parts."""
    import torch
    from transformers import Qwen3Config, Qwen3Model

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
    )
    return Qwen3Model(config).eval()
