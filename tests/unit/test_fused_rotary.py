"""Rotary embeddings routed through a compiled function: the same output, on the device asked for only, and undone cleanly.

The compile backend here counts the graphs dynamo hands it and runs them as traced (no code
generation); the real Inductor backend runs in tests/integration/test_fused_rotary_encoder.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from transformers import BertConfig, BertModel, Qwen3Model
from transformers.models.qwen3 import modeling_qwen3

from mcp_classifier.engine.accel.fused_rotary import ROTARY_FUNCTION, CompiledRotary, fuse_rotary, unfuse_rotary
from tests.support.compile_backends import CountingBackend
from tests.support.tiny_models import tiny_qwen3_model


@pytest.fixture
def qwen3() -> Iterator[Qwen3Model]:
    model = tiny_qwen3_model()
    original = getattr(modeling_qwen3, ROTARY_FUNCTION)
    yield model
    unfuse_rotary(model)  # the swap is module-wide: no other test may see it
    torch._dynamo.reset()  # nor torch.compile's cache for the function, which has a recompile limit
    assert getattr(modeling_qwen3, ROTARY_FUNCTION) is original


def last_hidden(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.arange(2 * 7).reshape(2, 7) % 64
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).last_hidden_state


def test_every_attention_layer_goes_through_the_compiled_function_and_the_output_stays(qwen3: Qwen3Model) -> None:
    expected = last_hidden(qwen3)
    backend = CountingBackend()
    assert fuse_rotary(qwen3, "cpu", backend) == 3
    assert isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    got = last_hidden(qwen3)
    assert backend.compiles >= 1 and backend.calls == 3  # one call per layer, all compiled
    torch.testing.assert_close(got, expected)
    unfuse_rotary(qwen3)
    assert not isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    last_hidden(qwen3)
    assert backend.calls == 3  # undone: nothing more went through it


def test_a_model_on_another_device_keeps_transformers_own_function(qwen3: Qwen3Model) -> None:
    expected = last_hidden(qwen3)
    backend = CountingBackend()
    assert fuse_rotary(qwen3, "cuda", backend) == 3  # as a GPU replica would; this model runs on the CPU
    torch.testing.assert_close(last_hidden(qwen3), expected)
    assert backend.compiles == 0 and backend.calls == 0


def test_fusing_twice_wraps_once_and_a_model_without_rotary_embeddings_is_left_alone(qwen3: Qwen3Model) -> None:
    backend = CountingBackend()
    fuse_rotary(qwen3, "cuda", backend)
    wrapper = getattr(modeling_qwen3, ROTARY_FUNCTION)
    assert fuse_rotary(tiny_qwen3_model(layers=2), "cpu", backend) == 2  # a second encoder, as after a hot reload
    assert getattr(modeling_qwen3, ROTARY_FUNCTION) is wrapper and wrapper.device_types == {"cuda", "cpu"}
    last_hidden(qwen3)
    assert backend.calls == 3  # the CPU model now goes through the compiled function too
    bert = BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)).eval()
    assert fuse_rotary(bert, "cpu", backend) == 0  # learned absolute positions: nothing to route
