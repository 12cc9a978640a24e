"""What a speed-up is to the encoder: a change it applies to a loaded model, and its undo.

Each speed-up trades some of the model's own code for a faster route (a fused op, a compiled
kernel, fp16 weight copies, a graph replay) that must leave every embedding as it was. A speed-up
knows only how to make and unmake its change; whether the change is kept is decided in one place
for all of them (verify.apply_checked), so each new one is held to the same check.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from ..options import EngineOptions, Switch

if TYPE_CHECKING:
    from .cuda_graphs import GraphedForward


class Encoder(Protocol):
    """The encoder as its speed-ups see it: the loaded model, where it runs, and the probe's two ways through it."""

    cuda_graphs: GraphedForward | None  # the forward replayed as CUDA graphs, once they are on

    @property
    def model(self) -> nn.Module: ...

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def options(self) -> EngineOptions: ...

    @property
    def applied(self) -> dict[str, int]:
        """What each speed-up in place changed, by its name."""
        ...

    @property
    def feature_layers(self) -> tuple[int, ...]: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def max_seq_length(self) -> int: ...

    @property
    def pack_width(self) -> int: ...

    @property
    def pad_id(self) -> int: ...

    def last_hidden_packed(self, input_ids: torch.Tensor, position_ids: torch.Tensor, segment_ids: torch.Tensor) -> torch.Tensor:
        """The forward a CUDA graph records: packed inputs on the device in, the last layer out."""
        ...

    def embed_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Each text through its own padded, eager forward: the reference every check compares with."""
        ...

    def embed_packed(self, texts: Sequence[str]) -> np.ndarray:
        """The texts packed into rows of the pack width, through the CUDA graphs where they are on."""
        ...


class SpeedUp(ABC):
    """One speed-up: kept where the probe's embeddings with it stay the eager model's (verify.apply_checked), else undone."""

    name: ClassVar[str]  # as log lines name it, in the plural: "<name> are off: ..."
    trial: ClassVar[str] = "running the model with them"  # the step of the check that may fail, as a log line says it

    @abstractmethod
    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        """Whether the options ask for it where the model runs: the auto/on/off rule, applied at load."""

    @abstractmethod
    def apply(self, encoder: Encoder) -> int:
        """Make the change; how much it changed (layers, graphs), 0 where nothing of this model's takes it (logged why)."""

    @abstractmethod
    def undo(self, encoder: Encoder) -> None:
        """Put the model's own route back; harmless where nothing was applied."""

    @abstractmethod
    def describe(self, encoder: Encoder, changed: int) -> str:
        """What a kept change does, for the log line that says it is on."""

    def embed(self, encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
        """The probe's embeddings with the change in place: each text alone, as the reference, for a change to the model."""
        return encoder.embed_alone(texts)

    def settle(self, encoder: Encoder) -> None:  # noqa: B027 (a hook most speed-ups leave empty)
        """Work worth doing only once the check has passed: it costs time at load, or memory."""


def auto_on_cuda(choice: Switch, device: torch.device) -> bool:
    """auto: on CUDA only, where fusing saves passes over GPU memory; on the CPU the same steps run either way, or slower
    (compiled layers: a lone MiniLM text 19-21 against 14 ms on a 2-core EPYC, docs/decisions/0020-compiled-layers.md)."""
    return choice == "on" or (choice == "auto" and device.type == "cuda")
