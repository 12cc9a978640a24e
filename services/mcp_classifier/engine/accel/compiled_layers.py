"""Each layer of a model's stack run through torch.compile, so a layer's elementwise work runs as a few fused kernels.

Why: on an H200, with graphs, fused norms and fused rotary embeddings, a batch of 256 32-token
queries of Qwen3-Embedding-0.6B still spent 19.6 of its 29.2 ms of kernels outside the matmuls and
attention: norms, rotary embeddings, the keys' and values' copies to every query head, SiLU and its
product, residual adds, each a pass over GPU memory. Inductor fuses them around cuBLAS's matmuls:
29.2 -> 19.9 ms of kernels, 28% -> 37% of the compute floor (docs/decisions/0020-compiled-layers.md).

Per layer, not the whole model: with parameters as the graph's inputs (torch's default since 2.5)
the layers of one class share one compiled graph, where compiling the whole model traces every
layer and did not finish in 150 s on the H200. Dynamic shapes: one graph for every batch shape, not
a compile per bucket of the CUDA graphs. Written here because the stack is found generically (any
family's decoder or encoder layers) and compiled in place, which torch's ``nn.Module.compile`` does
for one module; this finds the modules and undoes it.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import torch
from torch import nn

from ..options import EngineOptions
from .base import Encoder, auto_on_cuda
from .fused_rotary import CompileBackend, CompiledSwap

log = logging.getLogger(__name__)


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's stack of identical layers: its longest ModuleList whose modules are all of one class."""
    best: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) > len(best) and len({type(m) for m in module}) == 1:
            best = list(module)
    return best


def compile_layers(model: nn.Module, backend: CompileBackend = "inductor") -> int:
    """Route every layer of the model's stack through torch.compile; returns the layers affected.

    Nothing compiles here: the first forward does (tens of seconds on a GPU host), so the caller
    runs one before relying on it, and before any CUDA graph is captured.
    """
    layers = repeated_blocks(model)
    for layer in layers:
        layer.compile(dynamic=True, backend=backend)
    return len(layers)


def uncompile_layers(model: nn.Module) -> None:
    """Every layer of the stack runs its own forward again."""
    for layer in repeated_blocks(model):
        layer._compiled_call_impl = None  # what nn.Module.compile set; torch offers no public undo


class CompiledLayers(CompiledSwap):
    """A layer's elementwise work fused around its matmuls, one compiled graph shared by every layer of the stack."""

    name: ClassVar[str] = "compiled layers"

    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        return auto_on_cuda(options.compiled_layers, device)

    def apply(self, encoder: Encoder) -> int:
        layers = compile_layers(encoder.model, self.backend)
        if not layers:
            log.debug("compiled layers are off: the model has no stack of identical layers")
        return layers

    def undo(self, encoder: Encoder) -> None:
        uncompile_layers(encoder.model)

    def describe(self, encoder: Encoder, changed: int) -> str:
        return f"{changed} layers run through torch.compile"
