"""Small calls take the packed fp16 weights, large ones the layer's own fp32 weights (real fbgemm ops, no model)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional

from mcp_classifier.engine.accel.fp16_weights import drop_fp16_weights, fp16_weights_available, use_fp16_weights

pytestmark = pytest.mark.skipif(not fp16_weights_available(), reason="this torch build has no fbgemm fp16 GEMM on this CPU")

LIMIT = 8


def layers() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32, bias=False))


def fp32_reference(model: nn.Sequential, inputs: torch.Tensor) -> torch.Tensor:
    first, last = model[0], model[2]
    return functional.linear(functional.gelu(functional.linear(inputs, first.weight, first.bias)), last.weight)


def fp16_reference(model: nn.Sequential, inputs: torch.Tensor) -> torch.Tensor:
    first, last = model[0], model[2]
    packed_first = torch.ops.quantized.linear_prepack_fp16(first.weight.detach(), first.bias.detach())
    packed_last = torch.ops.quantized.linear_prepack_fp16(last.weight.detach(), None)
    hidden = functional.gelu(torch.ops.quantized.linear_dynamic_fp16(inputs, packed_first))
    return torch.ops.quantized.linear_dynamic_fp16(hidden, packed_last)


@torch.inference_mode()
@pytest.mark.parametrize("shape", [(1, 64), (LIMIT, 64), (2, 4, 64)])  # rows counted over every leading dimension
def test_calls_of_up_to_the_limit_run_on_fp16_weights_close_to_fp32(shape: tuple[int, ...]) -> None:
    model = layers()
    assert use_fp16_weights(model, LIMIT) == 2
    inputs = torch.randn(*shape)
    out = model(inputs)
    assert torch.equal(out, fp16_reference(model, inputs))
    exact = fp32_reference(model, inputs)
    assert not torch.equal(out, exact)  # the fp16 weights really ran: their rounding shows
    assert torch.linalg.vector_norm(out - exact) <= 2e-3 * torch.linalg.vector_norm(exact)


@torch.inference_mode()
@pytest.mark.parametrize("shape", [(LIMIT + 1, 64), (3, 4, 64)])
def test_larger_calls_keep_the_layer_s_own_fp32_weights_exactly(shape: tuple[int, ...]) -> None:
    model = layers()
    use_fp16_weights(model, LIMIT)
    inputs = torch.randn(*shape)
    assert torch.equal(model(inputs), fp32_reference(model, inputs))


@torch.inference_mode()
def test_a_new_limit_reuses_the_packed_copy_and_zero_sends_every_call_to_fp32() -> None:
    model = layers()
    use_fp16_weights(model, LIMIT)
    packed = model[0]._fp16_packed_weight
    assert use_fp16_weights(model, 0) == 2
    assert model[0]._fp16_packed_weight is packed
    inputs = torch.randn(1, 64)
    assert torch.equal(model(inputs), fp32_reference(model, inputs))


def test_only_fp32_linear_layers_take_a_copy() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 16).to(torch.bfloat16))
    assert use_fp16_weights(model, LIMIT) == 1
    assert hasattr(model[0], "_fp16_packed_weight")
    assert not hasattr(model[1], "_fp16_packed_weight") and not hasattr(model[2], "_fp16_packed_weight")


@torch.inference_mode()
def test_dropping_puts_every_layer_back_on_its_own_forward() -> None:
    model = layers()
    use_fp16_weights(model, LIMIT)
    drop_fp16_weights(model)
    assert "forward" not in vars(model[0]) and not hasattr(model[0], "_fp16_packed_weight")
    inputs = torch.randn(1, 64)
    assert torch.equal(model(inputs), fp32_reference(model, inputs))
