"""A model's RMSNorm layers run as torch's own fused ``rms_norm``: one kernel where transformers launches eight.

Why: transformers' RMSNorm (Llama, Qwen2/3, Mistral and kin) upcasts its input to fp32 and runs
the cast, square, mean, epsilon, rsqrt, product, cast back and weight product as eight kernels,
six of them full passes over the activations (bf16: 8 ops in its profile). Qwen3 has four per layer (the hidden states twice, every head's queries and
keys once), 113 in Qwen3-Embedding-0.6B. On an H100 a 256 x 64-token batch took 99 ms where its
matmuls need about 25 (docs/decisions/0018-fused-norms.md), and these passes are a large part of the rest. On
CUDA ``torch.nn.functional.rms_norm`` is one kernel (``aten::_fused_rms_norm``) reading the bf16
input once, accumulating in fp32 inside. CUDA graphs remove the launches; this removes the passes.

A layer is swapped only where its own output on a random probe equals the fused one within bf16
rounding, in the same dtype: a variant with another formula (Gemma's ``1 + weight``) keeps its own
forward, and so does a layer whose weight a model keeps in fp32 beside bf16 activations (torch
cannot fuse mixed dtypes, and transformers' layer would hand on fp32 where the fused op gives bf16). The
encoder also compares whole embeddings before and after, and puts the layers back on a mismatch.
Written here because transformers' own route to fused norms (``use_kernels``) downloads its kernels
from the Hub at load, which an offline cluster cannot do.
"""

from __future__ import annotations

import logging
from types import MethodType
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional

from ..options import EngineOptions
from .base import Encoder, SpeedUp, auto_on_cuda

log = logging.getLogger(__name__)

MAX_RELATIVE_ERROR = 1e-2  # bf16 rounds each value by up to 2**-8: a different formula misses by far more
PROBE_ROWS = 8
PROBE_SEED = 0
_EPSILON_ATTRIBUTES = ("variance_epsilon", "eps")  # transformers' names for it, by family
_FUSED = "_fused_rms_norm_epsilon"  # set on a swapped layer: marks it, and holds what its forward passes


def rms_norm_epsilon(module: nn.Module) -> float | None:
    """The epsilon of an RMSNorm layer as transformers writes them (a 1-D weight, a float epsilon), else None."""
    weight = getattr(module, "weight", None)
    if not type(module).__name__.endswith("RMSNorm") or not isinstance(weight, nn.Parameter) or weight.dim() != 1:
        return None
    for name in _EPSILON_ATTRIBUTES:
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _fused_forward(self: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    weight = self.weight
    assert isinstance(weight, torch.Tensor)
    return functional.rms_norm(hidden_states, (hidden_states.shape[-1],), weight, getattr(self, _FUSED))


@torch.inference_mode()
def _agrees(module: nn.Module, epsilon: float, activations: torch.dtype) -> bool:
    weight = module.weight
    assert isinstance(weight, torch.Tensor)
    if weight.dtype != activations:
        return False
    generator = torch.Generator(device=weight.device).manual_seed(PROBE_SEED)
    probe = torch.randn(PROBE_ROWS, weight.shape[0], generator=generator, device=weight.device, dtype=activations)
    own = module(probe)
    fused = functional.rms_norm(probe, (weight.shape[0],), weight, epsilon)
    if own.dtype != fused.dtype:
        return False
    own, fused = own.float(), fused.float()
    return bool(torch.linalg.vector_norm(own - fused) <= MAX_RELATIVE_ERROR * torch.linalg.vector_norm(own))


def fuse_rms_norms(model: nn.Module, activations: torch.dtype) -> tuple[int, int]:
    """Swap every RMSNorm layer whose output the fused op reproduces for inputs of the ``activations`` dtype.

    Returns (swapped, kept as they were).
    """
    swapped = kept = 0
    for module in model.modules():
        epsilon = rms_norm_epsilon(module)
        if epsilon is None or hasattr(module, _FUSED):
            continue
        if _agrees(module, epsilon, activations):
            setattr(module, _FUSED, epsilon)
            module.forward = MethodType(_fused_forward, module)
            swapped += 1
        else:
            kept += 1
    return swapped, kept


def unfuse_rms_norms(model: nn.Module) -> None:
    """Every swapped layer back on its own forward."""
    for module in model.modules():
        if hasattr(module, _FUSED):
            del module.forward
            delattr(module, _FUSED)


class FusedNorms(SpeedUp):
    """One kernel per RMSNorm where transformers launches eight; tried before graphs are captured, which record the kernels they saw."""

    name: ClassVar[str] = "fused norms"

    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        return auto_on_cuda(options.fused_norms, device)

    def apply(self, encoder: Encoder) -> int:
        swapped, kept = fuse_rms_norms(encoder.model, encoder.dtype)
        if not swapped and kept:
            log.debug("fused norms are off: none of the model's %d RMSNorm layers matches torch's rms_norm", kept)
        return swapped

    def undo(self, encoder: Encoder) -> None:
        unfuse_rms_norms(encoder.model)

    def describe(self, encoder: Encoder, changed: int) -> str:
        kept = sum(1 for m in encoder.model.modules() if rms_norm_epsilon(m) is not None and not hasattr(m, _FUSED))
        return f"{changed} RMSNorm layers run as torch's fused rms_norm ({kept} kept their own forward)"
