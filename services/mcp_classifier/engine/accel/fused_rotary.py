"""A model's rotary position embeddings applied by one compiled kernel per call, where transformers launches ten.

Why: on an H200 a batch of 256 32-token queries of Qwen3-Embedding-0.6B spent 10.4 of its 34 ms of
kernels applying rotary embeddings, more than its matmuls (9.7 ms; docs/decisions/0019-fused-rotary.md).
transformers' ``apply_rotary_pos_emb`` computes ``q * cos + rotate_half(q) * sin`` and the same for
k as separate kernels (two products, a negation, a concatenation and a sum each), every one a pass
over q or k, and its products ran at a third of the card's bandwidth. ``torch.compile`` (Inductor)
fuses each call into one kernel that reads q, k, cos and sin once.

transformers calls the function by its module's global name from each attention layer's forward,
so the swap is made in that module's namespace, once per modelling module. The compiled function
runs only for tensors on the device types it was asked for: a model of the same family on another
device in the process keeps transformers' own. The encoder compares whole embeddings before and after and
puts the original back on a mismatch or a failed compile. Written here because transformers' own
route (``use_kernels``) downloads its kernels from the Hub at load, which an offline cluster cannot do.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..options import EngineOptions
from .base import Encoder, SpeedUp, auto_on_cuda

log = logging.getLogger(__name__)

ROTARY_FUNCTION = "apply_rotary_pos_emb"  # the name transformers' modelling modules give it (Llama, Qwen2/3, Mistral and kin)
CompileBackend = str | Callable[..., Any]


class CompiledRotary:
    """Stands in for a modelling module's ``apply_rotary_pos_emb``: compiled on the device types asked for, the original elsewhere.

    One per modelling module for the life of the process: an encoder loaded again (a hot reload)
    reuses it, so torch.compile's cache for the function does not grow past its recompile limit.
    """

    def __init__(self, original: Callable[..., Any], backend: CompileBackend = "inductor") -> None:
        self.original = original
        self.device_types: set[str] = set()
        # dynamic: one kernel for every batch shape, rather than a compile per bucket of the CUDA graphs.
        self.compiled = torch.compile(original, dynamic=True, backend=backend)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if q.device.type in self.device_types:
            return self.compiled(q, k, *args, **kwargs)
        return self.original(q, k, *args, **kwargs)


def _rotary_namespaces(model: nn.Module) -> tuple[int, list[dict[str, Any]]]:
    """The layers whose forward calls the module-level rotary function, and those modules' namespaces."""
    layers = 0
    namespaces: dict[str, dict[str, Any]] = {}
    for module in model.modules():
        forward = inspect.unwrap(type(module).forward)  # under transformers' decorators (deprecated kwargs)
        code = getattr(forward, "__code__", None)
        namespace = getattr(forward, "__globals__", None)
        if code is None or namespace is None or ROTARY_FUNCTION not in code.co_names or not callable(namespace.get(ROTARY_FUNCTION)):
            continue
        layers += 1
        namespaces[str(namespace.get("__name__"))] = namespace
    return layers, list(namespaces.values())


def fuse_rotary(model: nn.Module, device_type: str, backend: CompileBackend = "inductor") -> int:
    """Route the model's rotary embeddings through a compiled function on ``device_type``; returns the layers affected.

    Nothing compiles here: the first forward on that device does (a few seconds), so the caller runs
    one before relying on it, and before any CUDA graph is captured.
    """
    layers, namespaces = _rotary_namespaces(model)
    for namespace in namespaces:
        current = namespace[ROTARY_FUNCTION]
        if not isinstance(current, CompiledRotary):
            current = namespace[ROTARY_FUNCTION] = CompiledRotary(current, backend)
        current.device_types.add(device_type)
    return layers


def unfuse_rotary(model: nn.Module) -> None:
    """transformers' own rotary function back in every modelling module this model uses."""
    for namespace in _rotary_namespaces(model)[1]:
        current = namespace[ROTARY_FUNCTION]
        if isinstance(current, CompiledRotary):
            namespace[ROTARY_FUNCTION] = current.original


@dataclass(frozen=True)
class CompiledSwap(SpeedUp):
    """Part of the model routed through torch.compile, which compiles on the probe's first forwards.

    So a compiler that is missing or miscompiles shows in the check, and is undone there; applied
    before CUDA graphs are captured, which record the kernels the compile made.
    """

    backend: CompileBackend = "inductor"  # torch.compile's (tests count or spoil what it compiles)
    trial: ClassVar[str] = "compiling them"


class FusedRotary(CompiledSwap):
    """One compiled kernel for a call's rotary embeddings, where transformers launches ten passes over q and k."""

    name: ClassVar[str] = "fused rotary embeddings"

    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        return auto_on_cuda(options.fused_rotary, device)

    def apply(self, encoder: Encoder) -> int:
        layers = fuse_rotary(encoder.model, encoder.device.type, self.backend)
        if not layers:
            log.debug("fused rotary embeddings are off: the model's layers call no %s", ROTARY_FUNCTION)
        return layers

    def undo(self, encoder: Encoder) -> None:
        unfuse_rotary(encoder.model)

    def describe(self, encoder: Encoder, changed: int) -> str:
        return f"{changed} attention layers apply rotary embeddings as one compiled kernel a call"
