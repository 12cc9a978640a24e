"""Small model calls on a CPU multiply by a packed fp16 copy of each linear layer's weights.

Why: torch's fp32 linear on a CPU (MKL's sgemm) packs the weight matrix into its own layout on
every call. A lone query of ~16 tokens does little arithmetic per weight it reads, so packing and
streaming the weights is most of its cost: on a 2-core AVX2 host MiniLM's 36 encoder linears ran
at 27 GFLOPS for 16 tokens against 75 for 512 (docs/decisions/0012-fp16-weights-for-small-calls.md). fbgemm's fp16
GEMM (torch's ``quantized::linear_dynamic_fp16``) keeps the weights packed once, at half the size,
and accumulates in fp32: 1.6x (one thread) to 2x (two) faster at 16 tokens, no faster from about
200 tokens on. So a layer takes the fp16 copy for calls of at most ``max_tokens`` token rows and
its own fp32 weights above that: a lone query gets faster, a full batch stays as it was.

Written here because torch's own route (``torch.ao.quantization.quantize_dynamic`` with
``dtype=torch.float16``) is deprecated in torch 2.x (it warns at every call) and swaps every call,
the large ones included, where the fp32 path is as fast or faster. The GEMM itself is torch's.
"""

from __future__ import annotations

import logging
from functools import cache
from types import MethodType
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional

from ..options import EngineOptions
from .base import Encoder, SpeedUp

log = logging.getLogger(__name__)

_PACKED = "_fp16_packed_weight"  # set on a swapped layer: marks it, and holds fbgemm's packed copy
_LIMIT = "_fp16_max_tokens"


@cache  # a property of the host and the torch build: probed once a process, not at every model load
def fp16_weights_available() -> bool:
    """Whether this torch build runs fbgemm's fp16 GEMM here (x86 with AVX2; not on ARM builds)."""
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return False
    try:
        packed = torch.ops.quantized.linear_prepack_fp16(torch.ones(8, 8), None)
        torch.ops.quantized.linear_dynamic_fp16(torch.ones(1, 8), packed)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False
    return True


def _small_call_forward(self: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
    if inputs.numel() <= getattr(self, _LIMIT) * self.in_features:
        return torch.ops.quantized.linear_dynamic_fp16(inputs, getattr(self, _PACKED))
    return functional.linear(inputs, self.weight, self.bias)


def use_fp16_weights(model: nn.Module, max_tokens: int) -> int:
    """Give every fp32 CPU linear layer a packed fp16 copy, taken by calls of at most ``max_tokens`` rows.

    Returns how many layers took it. A layer already swapped has its limit set again.
    """
    swapped = 0
    for module in model.modules():
        if not isinstance(module, nn.Linear) or module.weight.dtype != torch.float32 or module.weight.device.type != "cpu":
            continue
        layer: nn.Module = module  # its forward replaced on the instance, as a plain module's attribute
        if not hasattr(layer, _PACKED):
            bias = None if module.bias is None else module.bias.detach()
            setattr(layer, _PACKED, torch.ops.quantized.linear_prepack_fp16(module.weight.detach(), bias))
            layer.forward = MethodType(_small_call_forward, module)
        setattr(layer, _LIMIT, max_tokens)
        swapped += 1
    return swapped


def drop_fp16_weights(model: nn.Module) -> None:
    """Every swapped layer back on its own fp32 forward, its fp16 copy freed."""
    for module in model.modules():
        if hasattr(module, _PACKED):
            del module.forward
            delattr(module, _PACKED)
            delattr(module, _LIMIT)


class Fp16Weights(SpeedUp):
    """Calls of up to the options' ``fp16_weights_max_tokens`` tokens on fp16 weight copies: CPU, fp32 models.

    A fixed size, not one timed at load: every replica of a deployment then answers a text alike
    (a timed size could differ between replicas started on a busy and a quiet core). Applied after
    the forward's cost is measured: batches are planned for the fp32 calls that large batches make.
    """

    name: ClassVar[str] = "fp16 weights for small calls"

    def wanted(self, device: torch.device, options: EngineOptions) -> bool:
        if options.fp16_weights_max_tokens and device.type != "cpu":
            log.debug("fp16 weights for small calls are off: they are for fp32 models on a CPU, and the model runs on %s", device)
        return bool(options.fp16_weights_max_tokens) and device.type == "cpu"

    def apply(self, encoder: Encoder) -> int:
        if encoder.device.type != "cpu" or encoder.dtype != torch.float32:
            log.debug("fp16 weights for small calls are off: they are for fp32 models on a CPU (%s, %s)", encoder.device, encoder.dtype)
            return 0
        if not fp16_weights_available():
            log.debug("fp16 weights for small calls are off: this torch build has no fbgemm fp16 GEMM on this CPU")
            return 0
        layers = use_fp16_weights(encoder.model, encoder.options.fp16_weights_max_tokens)
        if not layers:
            log.debug("fp16 weights for small calls are off: the model has no fp32 linear layer")
        return layers

    def undo(self, encoder: Encoder) -> None:
        drop_fp16_weights(encoder.model)

    def describe(self, encoder: Encoder, changed: int) -> str:
        return f"{changed} linear layers take packed fp16 weights for calls of up to {encoder.options.fp16_weights_max_tokens} tokens"
