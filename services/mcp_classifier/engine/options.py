"""The engine's tuning knobs, kept apart from what decides an embedding (model, pooling, instruction, length).

One value rather than a constructor parameter each: the service, the tests and the benchmarks
build an encoder from it alike, and a new speed-up adds a field here, not a parameter to every
call site.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the settings are read, never imported at run time: the engine loads without pydantic's models
    from ..settings import EngineSettings

Switch = Literal["auto", "on", "off"]
"""auto: on where the speed-up pays (on CUDA); on: tried wherever it runs; off: never tried."""


@dataclass(frozen=True)
class EngineOptions:
    """How the engine batches its model calls and which speed-ups it tries; none changes an embedding beyond float rounding.

    The defaults are the plain engine (padded batches, every speed-up off, the forward's cost measured
    at load) that tests and benchmarks start from; the service takes its settings' (from_settings).
    """

    batch_size: int = 32
    forward_overhead_tokens: float = 0.0  # a model call's fixed cost in tokens of padding; 0: measured at load
    pack_width: int = 0  # texts packed end to end into rows of about this many tokens; 0: padded sub-batches
    fused_norms: Switch = "off"
    fused_rotary: Switch = "off"
    compiled_layers: Switch = "off"
    fp16_weights_max_tokens: int = 0  # CPU calls of at most this many tokens on fp16 weight copies; 0: none
    cuda_graphs: Switch = "off"
    probe_cache_dir: Path | None = None  # where the load-time probes' results are kept (probe_cache); None: probed every load

    @classmethod
    def from_settings(cls, engine: EngineSettings, *, batch_size: int, probe_cache_dir: Path | None) -> EngineOptions:
        """The engine's own settings group, and the two values it shares with others: the batching's batch size and the
        start cache's folder (None with the start cache off)."""
        return cls(
            batch_size=batch_size,
            forward_overhead_tokens=engine.forward_overhead_tokens,
            pack_width=engine.pack_width_tokens,
            fused_norms=engine.fused_norms,
            fused_rotary=engine.fused_rotary,
            compiled_layers=engine.compiled_layers,
            fp16_weights_max_tokens=engine.fp16_weights_max_tokens,
            cuda_graphs=engine.cuda_graphs,
            probe_cache_dir=probe_cache_dir,
        )
