"""Tokenise step: texts -> token ids (once per batch), padded per model call, and the prompts put before them.

(How many threads the tokenizer itself runs on is tokenizer_threads'.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .packing import Pooling
from .st_modules import SentenceTransformerSpec


def prepare_tokenizer(tokenizer: Any, pooling: Pooling) -> None:
    """Padding where the pooling reads it right, and a pad token where the model names none (decoders)."""
    if pooling == "last":
        # Last-token pooling reads position -1, so padding must sit on the left.
        tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token


class Tokeniser:
    """The model's tokenizer, called one batch at a time, with the padding and token bookkeeping the forward needs."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer = tokenizer
        self.max_length = max_length
        # The tokens a tokenizer adds ([CLS], [SEP], an end-of-text): an unknown word's [UNK] is the text's own.
        self.special_ids = frozenset(int(i) for i in tokenizer.all_special_ids) - {tokenizer.unk_token_id}
        # HF fast tokenizers change their padding/truncation state per call: not safe to share
        # across threads, so calls are serialised (the forward itself runs concurrently).
        self._lock = threading.Lock()

    @property
    def left_padded(self) -> bool:
        """Read on every call: a test may turn a tokenizer's padding side after load."""
        return bool(self.tokenizer.padding_side == "left")

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def tokenize(self, texts: Sequence[str]) -> dict[str, list[list[int]]]:
        """Unpadded token ids (and masks) of each text: tokenised once, padded per model call."""
        with self._lock:
            features = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        return {name: features[name] for name in self.tokenizer.model_input_names if name in features}

    def token_count(self, prefix: str) -> int:
        """Tokens a prompt takes before a text (none of the model's special ones)."""
        return len(self.tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0

    def content_positions(self, ids: list[int], skip: int) -> np.ndarray:
        """Where a text's own tokens sit in its ids: past any leading special token and the ``skip`` after it
        (the instruction), and not special themselves."""
        lead = next((j for j, token in enumerate(ids) if token not in self.special_ids), len(ids))
        return np.asarray([j for j in range(lead + skip, len(ids)) if ids[j] not in self.special_ids], dtype=np.int64)

    def pad(self, features: dict[str, list[list[int]]], device: torch.device) -> dict[str, torch.Tensor]:
        """Rows padded to the longest, on the tokenizer's padding side, on ``device``.

        Written by hand because `tokenizer.pad` re-validates every row in Python and costs as much
        as tokenising again; this is one array fill per input.
        """
        width = max(len(row) for row in features["input_ids"])
        left = self.left_padded
        pad_values = {"input_ids": self.tokenizer.pad_token_id, "token_type_ids": self.tokenizer.pad_token_type_id}
        tensors = {}
        for name, rows in features.items():
            array = np.full((len(rows), width), pad_values.get(name, 0), dtype=np.int64)
            for r, row in enumerate(rows):
                if left:
                    array[r, width - len(row) :] = row
                else:
                    array[r, : len(row)] = row
            tensors[name] = torch.from_numpy(array).to(device)
        return tensors


@dataclass(frozen=True)
class Prompts:
    """What goes before a query's and a document's text, and how many tokens each takes (token matching leaves them out)."""

    query: str = ""
    document: str = ""
    query_tokens: int = 0
    document_tokens: int = 0

    @classmethod
    def choose(
        cls, tokens: Tokeniser, spec: SentenceTransformerSpec, pooling: Pooling, query_instruction: str, instruction: str
    ) -> Prompts:
        """The instruction on queries where asked (on auto: last-token models, Qwen3-Embedding usage), else the
        model's own query prompt where its authors name one; documents get the model's document prompt only."""
        use_instruction = query_instruction == "always" or (query_instruction == "auto" and pooling == "last")
        query = f"Instruct: {instruction}\nQuery:" if use_instruction and instruction else ""
        if not query and query_instruction != "never":
            query = spec.query_prompt
        document = spec.document_prompt
        return cls(query, document, tokens.token_count(query), tokens.token_count(document))
