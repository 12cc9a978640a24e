"""RMSNorm layers swapped for torch's fused rms_norm: the same output, and only where the formula is the same."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.profiler import profile
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

from mcp_classifier.engine.accel.fused_norms import fuse_rms_norms, unfuse_rms_norms


class GemmaStyleRMSNorm(nn.Module):
    """Scales by (1 + weight), as Gemma's norm does: the fused op's formula is weight alone."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(size))
        self.eps = 1e-6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


class ListensToNoEpsilonRMSNorm(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


def ran_torchs_rms_norm(module: nn.Module, x: torch.Tensor) -> bool:
    with profile() as trace:
        module(x)
    return any(event.name == "aten::rms_norm" for event in trace.events())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_transformers_rms_norm_runs_as_torchs_fused_op_with_the_same_output(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    norm = Qwen3RMSNorm(48, eps=1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 48, dtype=dtype) * 4
    own = norm(x)
    assert not ran_torchs_rms_norm(norm, x)

    assert fuse_rms_norms(norm, dtype) == (1, 0)
    assert ran_torchs_rms_norm(norm, x)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(norm(x), own, rtol=tolerance, atol=tolerance)

    unfuse_rms_norms(norm)
    assert not ran_torchs_rms_norm(norm, x)
    torch.testing.assert_close(norm(x), own, rtol=0, atol=0)


def test_a_norm_with_another_formula_keeps_its_own_forward() -> None:
    norm = GemmaStyleRMSNorm(32)
    x = torch.randn(4, 32)
    own = norm(x)
    assert fuse_rms_norms(norm, torch.float32) == (0, 1)
    assert not ran_torchs_rms_norm(norm, x)
    torch.testing.assert_close(norm(x), own, rtol=0, atol=0)


def test_layers_that_are_not_transformers_rms_norms_are_not_counted() -> None:
    model = nn.Sequential(nn.LayerNorm(16), ListensToNoEpsilonRMSNorm(16), nn.Linear(16, 16))
    assert fuse_rms_norms(model, torch.float32) == (0, 0)


def test_fusing_twice_swaps_each_layer_once() -> None:
    model = nn.Sequential(Qwen3RMSNorm(16), Qwen3RMSNorm(16))
    assert fuse_rms_norms(model, torch.float32) == (2, 0)
    assert fuse_rms_norms(model, torch.float32) == (0, 0)


def test_a_norm_kept_in_fp32_beside_bf16_activations_keeps_its_own_forward() -> None:
    """transformers' layer hands on fp32 there; torch cannot fuse mixed dtypes and would hand on bf16."""
    norm = Qwen3RMSNorm(16)  # fp32 weight
    x = torch.randn(2, 16, dtype=torch.bfloat16)
    own = norm(x)
    assert fuse_rms_norms(norm, torch.bfloat16) == (0, 1)
    assert norm(x).dtype == own.dtype == torch.float32
