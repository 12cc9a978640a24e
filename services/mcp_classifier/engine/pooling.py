"""Pool step: the model's hidden states -> one unit vector per text (and, where asked, each text's token vectors).

Which pooling a model was trained with is read here too (its sentence-transformers config, else its
architecture), as is which layers feed the classification features.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Literal, cast

import numpy as np
import torch

from .packing import Pooling
from .st_modules import SentenceTransformerSpec, read_spec

log = logging.getLogger(__name__)

MiddleLayer = Literal["on", "off"]

# Decoder families used as embedders (Qwen3-Embedding and kin) pool on the last token.
_DECODER_MODEL_TYPES = {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3", "phi3"}


def is_decoder_family(config: object) -> bool:
    """A causal architecture used as an embedder: Qwen3-Embedding and kin."""
    model_type = getattr(config, "model_type", "")
    architectures = getattr(config, "architectures", None) or []
    return model_type in _DECODER_MODEL_TYPES or any(a.endswith("ForCausalLM") for a in architectures)


def detect_pooling_from_config(config: object) -> Pooling:
    """Last-token for decoder families (Qwen3-Embedding and kin), else mean."""
    return "last" if is_decoder_family(config) else "mean"


def detect_pooling(model_dir: str, config: object) -> Pooling:
    """Pooling the model's authors intended: sentence-transformers config first, then architecture."""
    return read_spec(model_dir).pooling or detect_pooling_from_config(config)


def resolve_pooling(asked: str, spec: SentenceTransformerSpec, config: object) -> Pooling:
    """The pooling asked for, or on auto the authors' (their sentence-transformers config, else the architecture's)."""
    return (spec.pooling or detect_pooling_from_config(config)) if asked == "auto" else cast(Pooling, asked)


def feature_layers(config: object, middle_layer: MiddleLayer) -> tuple[int, ...]:
    """hidden_states indices pooled into the classification features: the last layer, plus the middle one when asked.

    A middle layer keeps more of a text's words and phrasing than the last, which a
    sentence-embedding objective has pulled towards topic. Beside it, few examples per category
    separate better, but surface forms weigh more too (docs/decisions/0024-middle-layer-features.md), so it is the user's choice.
    """
    layers = int(getattr(config, "num_hidden_layers", 0) or 0)
    chosen = (-1, layers // 2) if middle_layer == "on" and layers >= 2 else (-1,)
    if len(chosen) > 1:
        log.debug("classifying on layer %d beside the last (middle_layer_features)", chosen[1])
    return chosen


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: Pooling, *, left_padded: bool) -> torch.Tensor:
    """One vector per padded row: its first token, its last real token, or the mean of its real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "last":
        if left_padded:
            return hidden[:, -1]
        last = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def pooled_features(
    layers: list[torch.Tensor], pool_layer: Callable[[torch.Tensor], torch.Tensor], head: torch.nn.Module | None
) -> np.ndarray:
    """Each feature layer pooled and unit length, side by side, scaled so the whole is unit length too.

    The authors' Dense head runs on the last layer's pooled vector only (fp32: it is small, and the
    pooled vector is cast up anyway).
    """
    pooled = [pool_layer(hidden).float() for hidden in layers]
    if head is not None:
        pooled[0] = head(pooled[0])
    blocks = [torch.nn.functional.normalize(vectors, p=2, dim=-1) for vectors in pooled]
    features = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=-1) / math.sqrt(len(blocks))
    return features.cpu().numpy()


class TokenRequest:
    """Which token positions of each text to keep (its own tokens), and the unit vectors found there."""

    def __init__(self, positions: list[np.ndarray]) -> None:
        self.positions = positions
        self.tokens: list[torch.Tensor] = [torch.zeros((0, 0))] * len(positions)

    def take(self, hidden: torch.Tensor, texts: np.ndarray, first_index: np.ndarray) -> None:
        """One gather for a model call: ``texts`` (global numbers) start at ``first_index`` of the flattened last layer."""
        wanted = [self.positions[int(t)] + int(start) for t, start in zip(texts, first_index)]
        with torch.inference_mode():
            flat = hidden.reshape(-1, hidden.shape[-1])
            index = torch.from_numpy(np.concatenate(wanted) if wanted else np.zeros(0, dtype=np.int64)).to(hidden.device)
            vectors = torch.nn.functional.normalize(flat[index].float(), p=2, dim=-1)  # stays on the model's device
        for text, part in zip(texts, torch.split(vectors, [len(w) for w in wanted])):
            self.tokens[int(text)] = part
