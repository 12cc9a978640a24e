"""Text -> L2-normalised embedding with any transformers encoder, batched and length-sorted.

An encoder is built in steps, each in its own module: device and dtype (device), the weights,
tokenizer and the authors' pipeline (loading), the prompts and token ids (tokenise), then the
load-time checks (load_checks). `TextEncoder.load` runs them; the constructor only keeps what they
gave. A call then runs tokenise -> forward (here: padded or packed, planned per batch) -> pool (pooling).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from . import load_checks
from .accel import CompiledLayers, CudaGraphs, Fp16Weights, FusedNorms, FusedRotary, SpeedUp
from .accel.cuda_graphs import Capture, GraphedForward
from .accel.fused_rotary import CompileBackend
from .accel.verify import undo
from .batch_plan import plan_cost, plan_sub_batches
from .device import choose_device_and_dtype, pick_device, pick_dtype
from .load_checks import PACKING_MIN_COSINE, run_load_checks
from .loading import BUILTIN_MINILM, LoadedModel, load_model, resolve_model_path
from .options import EngineOptions
from .packing import PackedBatch, Pooling, attention_mask, pack, packed_cost, pool_packed, split_calls
from .pooling import MiddleLayer, TokenRequest, detect_pooling, feature_layers, pool, pooled_features
from .st_modules import SentenceTransformerSpec
from .tokenise import Prompts, Tokeniser

# Names the service, tests and benchmarks import from here, wherever the step that owns them lives.
__all__ = [
    "BUILTIN_MINILM",
    "PACKING_MIN_COSINE",
    "EncoderInfo",
    "MiddleLayer",
    "TextEncoder",
    "detect_pooling",
    "pick_device",
    "pick_dtype",
    "pool",
    "resolve_model_path",
]


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
    """A loaded model that embeds texts; queries may carry the model's instruction prefix. Built by `load`."""

    def __init__(
        self,
        loaded: LoadedModel,
        tokens: Tokeniser,
        prompts: Prompts,
        *,
        device: torch.device,
        dtype: torch.dtype,
        feature_layers: tuple[int, ...],
        options: EngineOptions,
    ) -> None:
        self.model_id = loaded.model_id
        self.revision = loaded.revision
        self.model = loaded.model
        self.spec: SentenceTransformerSpec = loaded.spec
        self.head = loaded.head
        self.pooling: Pooling = loaded.pooling
        self.languages = loaded.languages
        self.model_dir = loaded.model_dir  # the files behind the model, for keys of the start cache; None: none on disk
        self.dimensions = loaded.dimensions
        self._hidden_size = loaded.hidden_size
        self._causal = loaded.causal
        self._no_cache = loaded.no_cache
        self.tokens = tokens
        self.max_seq_length = tokens.max_length
        self.query_prefix = prompts.query
        self.query_instruction = "auto"  # the setting the prompts were chosen under (for_instruction chooses again)
        self.document_prefix = prompts.document
        self._prefix_tokens = prompts.query_tokens  # token matching leaves out a prompt's tokens (encode_with_tokens)
        self._document_prefix_tokens = prompts.document_tokens
        self.device = device
        self.dtype = dtype
        self.feature_layers = feature_layers  # hidden_states indices pooled into the classification features
        self.options = options  # as asked; what is in effect: batch_size, forward_overhead_tokens, pack_width, applied
        self.batch_size = options.batch_size
        # Settled by the load-time checks (load_checks.run_load_checks), which `load` runs next.
        self.forward_overhead_tokens = options.forward_overhead_tokens
        self.pack_width = 0
        self.cuda_graphs: GraphedForward | None = None  # set by the CUDA graphs speed-up, after the packing check
        self.applied: dict[str, int] = {}  # what each speed-up in place changed, by its name
        self.last_batch_tokens = 0
        self.last_forward_calls = 0
        self.last_batch_packed = False  # read by tracing, like the two above

    @classmethod
    def load(
        cls,
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
    ) -> TextEncoder:
        """Load a model once, in steps: device and dtype, the weights and tokenizer, the prompts, then the load-time checks."""
        torch_device, torch_dtype = choose_device_and_dtype(device, dtype)
        loaded = load_model(model, revision, torch_device, torch_dtype, pooling)
        tokens = Tokeniser(loaded.tokenizer, max_seq_length)
        prompts = Prompts.choose(tokens, loaded.spec, loaded.pooling, query_instruction, instruction)
        layers = feature_layers(loaded.model.config, middle_layer)
        encoder = cls(loaded, tokens, prompts, device=torch_device, dtype=torch_dtype, feature_layers=layers, options=options)
        encoder.query_instruction = query_instruction
        run_load_checks(encoder)
        return encoder

    def for_instruction(self, instruction: str) -> TextEncoder:
        """This model with ``instruction`` before queries (another classifier's file): weights, tokenizer and the
        load-time checks' answers shared, only the query prompt its own. Itself where the prompt comes out the same
        (the model takes no instruction, or the same one), so classifiers that agree embed a query once."""
        prompts = Prompts.choose(self.tokens, self.spec, self.pooling, self.query_instruction, instruction)
        if prompts.query == self.query_prefix:
            return self
        view = copy.copy(self)
        view.query_prefix, view._prefix_tokens = prompts.query, prompts.query_tokens
        return view

    @property
    def tokenizer(self) -> Any:
        """The transformers tokenizer (its padding side is read on every call)."""
        return self.tokens.tokenizer

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
        features = self.tokens.tokenize(formatted)
        skip = self._prefix_tokens if query else self._document_prefix_tokens
        request = TokenRequest([self.tokens.content_positions(ids, skip) for ids in features["input_ids"]])
        pooled = self._encode(features, request)
        return pooled, request.tokens

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokens.tokenize(texts)["input_ids"]]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts packed into rows or padded in length-sorted sub-batches, whichever runs fewer tokens.

        Packing wins where lengths are mixed (live queries); where they are alike (a tool list)
        sorted padding wastes little and packing's wider attention costs more, so the plan is kept.
        """
        if not texts:
            return np.zeros((0, self.feature_dimensions), dtype=np.float32)
        return self.encode_tokenized(self.tokens.tokenize(texts))

    def encode_tokenized(self, features: dict[str, list[list[int]]]) -> np.ndarray:
        """``encode`` after tokenising (the benchmarks time the model's part alone with it).

        With CUDA graphs, always packed (rows as wide as the longest text where packing is off):
        the graphs take the packed layout, and a graph's forward costs the same for any batch that fits its bucket.
        """
        return self._encode(features)

    def _encode(self, features: dict[str, list[list[int]]], request: TokenRequest | None = None) -> np.ndarray:
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
        features = self.tokens.tokenize(texts)
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

    def encode_packed(self, token_ids: list[list[int]], width: int) -> np.ndarray:
        """Packed rows of ``width`` whatever the cost (the load-time packing check)."""
        batch, order = pack(token_ids, width, self.pad_id)
        return self._run_packed(batch, order, split_calls(batch, self.batch_size))

    def _run_packed(self, batch: PackedBatch, order: np.ndarray, calls: list[slice], request: TokenRequest | None = None) -> np.ndarray:
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
        self, features: dict[str, list[list[int]]], order: np.ndarray, groups: list[slice], request: TokenRequest | None = None
    ) -> np.ndarray:
        """Length-sorted (`order`), one padded call per group."""
        out = np.empty((len(order), self.feature_dimensions), dtype=np.float32)
        left = self.tokens.left_padded
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
        return self.tokens.pad(features, self.device)

    def _forward(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        return self._forward_with_hidden(batch)[0]

    @torch.inference_mode()
    def _forward_with_hidden(self, batch: dict[str, torch.Tensor]) -> tuple[np.ndarray, torch.Tensor]:
        left_padded = self.tokens.left_padded
        return self._features(batch, lambda hidden: pool(hidden, batch["attention_mask"], self.pooling, left_padded=left_padded))

    def _features(
        self, inputs: dict[str, torch.Tensor], pool_layer: Callable[[torch.Tensor], torch.Tensor]
    ) -> tuple[np.ndarray, torch.Tensor]:
        """One model call, its feature layers pooled (pooling.pooled_features).

        The last layer comes back too, for the texts whose token vectors are asked for.
        """
        output = self.model(**inputs, output_hidden_states=len(self.feature_layers) > 1, **self._no_cache)
        layers = [output.last_hidden_state] + [output.hidden_states[i] for i in self.feature_layers[1:]]
        return pooled_features(layers, pool_layer, self.head), output.last_hidden_state

    @property
    def pad_id(self) -> int:
        return self.tokens.pad_id

    @torch.inference_mode()
    def _forward_packed_with_hidden(self, batch: PackedBatch) -> tuple[np.ndarray, torch.Tensor]:
        if self.cuda_graphs is not None:
            hidden = self.cuda_graphs(batch.input_ids, batch.position_ids, batch.segment_ids)
            if hidden is not None:  # else past the graphs' caps: eagerly, below
                return pooled_features([hidden], lambda hidden: pool_packed(hidden, batch, self.pooling), self.head), hidden
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

    def embed_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Every text through its own padded, eager forward: the reference the load-time checks compare with."""
        features = self.tokens.tokenize(texts)
        return np.concatenate([self._forward(self._pad({k: [v[i]] for k, v in features.items()})) for i in range(len(texts))])

    def embed_packed(self, texts: Sequence[str]) -> np.ndarray:
        """The texts packed into rows of the pack width whatever the cost, through the CUDA graphs where they are on."""
        return self.encode_packed(self.tokens.tokenize(texts)["input_ids"], self.pack_width)

    def measure_forward_overhead(self, *, length: int = 16, rows: int = 8, repeats: int = 3) -> float:
        """A model call's fixed cost in tokens of padding, timed on this host (load_checks.measure_forward_overhead)."""
        return load_checks.measure_forward_overhead(self, length=length, rows=rows, repeats=repeats)

    def apply_speed_up(self, speed_up: SpeedUp) -> int:
        """Apply a speed-up where the probe's embeddings stay the eager model's; what it changed, 0 where it is off."""
        return load_checks.apply_speed_up(self, speed_up)

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
