"""The model's forward replayed as a CUDA graph, one graph per bucket of input shapes.

On a GPU a query's forward is launch-bound. Measured on an H100 (docs/decisions/0017-cuda-graphs.md): the eager
forward of Qwen3-Embedding-0.6B's architecture took ~25 ms for one text and about the same for 16
or 64, the CPU issuing each of the forward's ~1,000 kernels in turn; in a Ray replica, whose event
loop and gRPC threads take the GIL between those launches, a call of a few texts took 150-200 ms.
A graph issues the whole forward in one call, which releases the GIL.

Inputs come in the packed layout (packing.py): token ids, position ids and segment ids, so the
rows and columns a bucket adds are pads in segments of their own, which no text attends to. Shapes
round up to buckets (rows to a power of two, width to a multiple of 16, then of 64), so a few
dozen graphs serve every batch; a shape beyond the cap runs eagerly.

Written here because neither library has it for this model: transformers graphs only its
generation loop (static KV cache), and torch.compile's reduce-overhead mode recompiles per new
shape (on the H100, compiling three batch sizes of this model took most of three minutes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ..options import EngineOptions
from .base import Encoder, SpeedUp

log = logging.getLogger(__name__)

RunModel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""(input_ids, position_ids, segment_ids), each [rows, width] -> the last hidden state [rows, width, hidden]."""
Replay = Callable[[], Any]
Capture = Callable[[RunModel, torch.Tensor], tuple[Replay, torch.Tensor]]
"""(run, static inputs [3, rows, width]) -> (replay, the static output it refills)."""

NARROW_WIDTH_STEP = 16  # queries: a 20-token text pads to 32, not 64
NARROW_WIDTH_LIMIT = 64
WIDE_WIDTH_STEP = 64  # long texts: fewer graphs, and padding is a smaller share of them
WARM_WIDTHS = (16, 32, 48, 64)  # captured at load for every row count: the widths of queries and of packed rows
WARMUP_RUNS = 2  # eager runs on a side stream before capturing (cuBLAS handles, the allocator), as torch's docs advise
DEFAULT_MAX_GRAPHS = 48


def row_bucket(rows: int) -> int:
    """The next power of two."""
    return 1 << max(0, rows - 1).bit_length()


def width_bucket(width: int) -> int:
    step = NARROW_WIDTH_STEP if width <= NARROW_WIDTH_LIMIT else WIDE_WIDTH_STEP
    return -(-width // step) * step


def filler_inputs(shape: tuple[int, int], pad_id: int) -> np.ndarray:
    """[3, rows, width] int64 (ids, positions, segments): every cell a pad in a segment of its own."""
    rows, width = shape
    out = np.empty((3, rows, width), dtype=np.int64)
    out[0].fill(pad_id)
    out[1].fill(0)
    out[2] = -1 - np.arange(rows * width, dtype=np.int64).reshape(rows, width)
    return out


def bucket_inputs(
    input_ids: np.ndarray, position_ids: np.ndarray, segment_ids: np.ndarray, shape: tuple[int, int], pad_id: int
) -> np.ndarray:
    """The filler of ``shape`` with the batch in its top-left corner.

    A batch pad may share its negative segment id with a filler pad: then two pads see each other,
    which changes no text's vector.
    """
    out = filler_inputs(shape, pad_id)
    r, w = input_ids.shape
    out[0, :r, :w] = input_ids
    out[1, :r, :w] = position_ids
    out[2, :r, :w] = segment_ids
    return out


def capture_cuda_graph(run: RunModel, inputs: torch.Tensor, pool: Any = None) -> tuple[Replay, torch.Tensor]:
    """Warm up on a side stream, then record one forward over the static ``inputs``."""
    device = inputs.device
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_RUNS):
            run(inputs[0], inputs[1], inputs[2])
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # thread_local: another thread of the process (the event loop, gRPC) may touch CUDA meanwhile.
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        hidden = run(inputs[0], inputs[1], inputs[2])
    return graph.replay, hidden


@dataclass
class _Graph:
    inputs: torch.Tensor  # [3, rows, width], what the graph reads
    hidden: torch.Tensor  # what each replay rewrites
    replay: Replay


class GraphedForward:
    """Runs packed inputs through a graph of their bucket: captured by warm() at load, or on first use."""

    def __init__(
        self,
        run: RunModel,
        device: torch.device,
        pad_id: int,
        *,
        max_rows: int,
        max_width: int,
        max_graphs: int = DEFAULT_MAX_GRAPHS,
        capture: Capture | None = None,
    ) -> None:
        self._run = run
        self._device = device
        self._pad_id = pad_id
        self.max_rows = row_bucket(max_rows)
        self.max_width = width_bucket(max_width)
        self.max_graphs = max_graphs
        self._capture = capture or self._capture_on_cuda
        self._graphs: dict[tuple[int, int], _Graph] = {}
        # One memory pool for every graph. A replay may overwrite memory that another graph's output
        # occupies, which is safe because each output is copied out before any other replay (the lock).
        self._pool: Any = None
        # One replay at a time: a graph's static inputs and output are shared by every caller.
        self._lock = threading.Lock()

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The buckets captured so far, in capture order."""
        return list(self._graphs)

    @torch.inference_mode()
    def __call__(self, input_ids: np.ndarray, position_ids: np.ndarray, segment_ids: np.ndarray) -> torch.Tensor | None:
        """The last hidden state of these rows, or None where their bucket is past the caps (run them eagerly)."""
        rows, width = input_ids.shape
        shape = (row_bucket(rows), width_bucket(width))
        if shape[0] > self.max_rows or shape[1] > self.max_width:
            return None
        with self._lock:
            graph = self._graphs.get(shape)
            if graph is None:
                if len(self._graphs) >= self.max_graphs:
                    return None
                graph = self._new_graph(shape)
            graph.inputs.copy_(torch.from_numpy(bucket_inputs(input_ids, position_ids, segment_ids, shape, self._pad_id)))
            graph.replay()
            # A copy: the next replay of this graph rewrites its output.
            return graph.hidden[:rows, :width].clone()

    def warm(self, widths: Sequence[int]) -> None:
        """Capture now, rather than on a request, the buckets of every row count up to the cap at these widths.

        A capture costs about three eager forwards (~75 ms for Qwen3-Embedding-0.6B on an H100); at
        load that is a second or two, where on the request path it would be a stray slow reply.
        """
        buckets = [width_bucket(w) for w in widths]
        shapes = [
            (1 << k, w) for w in buckets if w <= self.max_width for k in range(self.max_rows.bit_length())
        ]  # max_rows: a power of two
        with self._lock:
            for shape in dict.fromkeys(shapes):
                if shape not in self._graphs and len(self._graphs) < self.max_graphs:
                    self._new_graph(shape)

    @torch.inference_mode()
    def _new_graph(self, shape: tuple[int, int]) -> _Graph:
        # Inference mode, whoever calls (warm() runs at load, outside the encoder's inference mode):
        # a capture that records autograd history keeps every layer's activations alive in the pool
        # as long as the graph's output lives. On an H200 that was 25.6 GB for one bucket of 256 rows
        # x 64 tokens of Qwen3-Embedding-0.6B, and warming 36 buckets ran out of its 140 GB.
        inputs = torch.from_numpy(filler_inputs(shape, self._pad_id)).to(self._device)
        replay, hidden = self._capture(self._run, inputs)
        self._graphs[shape] = graph = _Graph(inputs, hidden, replay)
        log.debug("captured the forward's CUDA graph for %d rows x %d tokens (%d graphs)", *shape, len(self._graphs))
        return graph

    def _capture_on_cuda(self, run: RunModel, inputs: torch.Tensor) -> tuple[Replay, torch.Tensor]:
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        return capture_cuda_graph(run, inputs, self._pool)


@dataclass(frozen=True)
class CudaGraphs(SpeedUp):
    """Forwards as graphs, where their embeddings are the eager padded ones; tried last, so they record every other speed-up's kernels.

    The graphs take the packed layout, so the check also shows whether the model honours position
    ids and a 4-D mask; a forward that cannot be captured (a host sync inside) is caught there too.
    The query-width buckets are captured only once the check has passed.
    """

    capture: Capture | None = None  # stands in for CUDA's graph capture (tests on machines without a GPU)
    name: ClassVar[str] = "CUDA graphs"
    trial: ClassVar[str] = "capturing them"

    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        if options.cuda_graphs == "off":
            return False
        if device.type != "cuda":
            if options.cuda_graphs == "on":
                log.warning("cuda_graphs is on but the model runs on %s: forwards run eagerly", device)
            return False
        return True

    def apply(self, encoder: Encoder) -> int:
        if self.capture is None and encoder.device.type != "cuda":
            log.warning("CUDA graphs need a CUDA device; the model runs on %s: forwards run eagerly", encoder.device)
            return 0
        if len(encoder.feature_layers) > 1:
            log.warning("CUDA graphs are off: they record the last layer only, and middle_layer_features is on")
            return 0
        encoder.cuda_graphs = GraphedForward(
            encoder.last_hidden_packed,
            encoder.device,
            encoder.pad_id,
            max_rows=encoder.batch_size,
            max_width=max(encoder.max_seq_length, encoder.pack_width),
            capture=self.capture,
        )
        return 1

    def undo(self, encoder: Encoder) -> None:
        encoder.cuda_graphs = None

    def embed(self, encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
        vectors = encoder.embed_packed(texts)
        if encoder.cuda_graphs is None or not encoder.cuda_graphs.shapes:
            raise RuntimeError("the probe ran eagerly: its batch is past the graphs' caps")
        return vectors

    def settle(self, encoder: Encoder) -> None:
        # A shape the probe did not have (more rows, a wider row) may fail to capture: the check's failure, then.
        if encoder.cuda_graphs is not None:
            encoder.cuda_graphs.warm(WARM_WIDTHS)

    def describe(self, encoder: Encoder, changed: int) -> str:
        captured = len(encoder.cuda_graphs.shapes) if encoder.cuda_graphs is not None else 0
        return f"the forward runs as CUDA graphs, one per batch shape bucket ({captured} captured at load, others on first use)"
