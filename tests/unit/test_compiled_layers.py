"""Each layer of a model's stack routed through torch.compile: every layer, one shared graph, the same output, undone cleanly.

The compile backend here counts the graphs dynamo hands it and runs them as traced (no code
generation); the real Inductor backend runs in tests/integration/test_compiled_layers_encoder.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from torch import nn
from transformers import BertConfig, BertModel, Qwen3Model

from mcp_classifier.engine.accel.compiled_layers import compile_layers, repeated_blocks, uncompile_layers
from tests.support.compile_backends import CountingBackend
from tests.support.tiny_models import tiny_qwen3_model


def tiny_qwen3(layers: int = 4) -> Qwen3Model:
    return tiny_qwen3_model(layers).requires_grad_(False)


@pytest.fixture
def qwen3() -> Iterator[Qwen3Model]:
    yield tiny_qwen3()
    torch._dynamo.reset()  # torch.compile's cache for nn.Module's call has a recompile limit shared by every test


def last_hidden(model: nn.Module, rows: int = 2, width: int = 7) -> torch.Tensor:
    ids = torch.arange(rows * width).reshape(rows, width) % 64
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).last_hidden_state


def test_the_stack_is_the_longest_list_of_one_layer_class() -> None:
    qwen3 = tiny_qwen3(layers=3)
    assert repeated_blocks(qwen3) == list(qwen3.layers)
    bert = BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64))
    assert repeated_blocks(bert) == list(bert.encoder.layer)
    mixed = nn.Sequential(nn.ModuleList([nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)]))
    assert repeated_blocks(mixed) == []  # layers of several classes are no stack
    assert compile_layers(mixed, CountingBackend()) == 0


def test_every_layer_runs_compiled_through_one_shared_graph_and_the_output_stays(qwen3: Qwen3Model) -> None:
    expected = last_hidden(qwen3)
    backend = CountingBackend()
    assert compile_layers(qwen3, backend) == 4
    torch.testing.assert_close(last_hidden(qwen3), expected)
    assert backend.calls == 4  # every layer went through a compiled graph
    compiles = backend.compiles
    assert compiles == 1  # one graph for the four layers: parameters are its inputs
    last_hidden(qwen3, rows=3, width=9)  # another batch shape: dynamic shapes, no compile per shape
    assert backend.compiles == compiles and backend.calls == 8


def test_uncompiling_puts_every_layer_back_on_its_own_forward(qwen3: Qwen3Model) -> None:
    expected = last_hidden(qwen3)
    backend = CountingBackend()
    compile_layers(qwen3, backend)
    last_hidden(qwen3)
    uncompile_layers(qwen3)
    torch.testing.assert_close(last_hidden(qwen3), expected)
    assert backend.calls == 4  # nothing more went through it


def test_a_model_loaded_again_reuses_the_compiled_graph(qwen3: Qwen3Model) -> None:
    """A hot reload builds new layers: they must not add compiles, whose cache has a limit per process."""
    backend = CountingBackend()
    compile_layers(qwen3, backend)
    last_hidden(qwen3)
    reloaded = tiny_qwen3()
    compile_layers(reloaded, backend)
    last_hidden(reloaded)
    assert backend.compiles == 1 and backend.calls == 8
