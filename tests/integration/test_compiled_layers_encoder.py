"""A Qwen3 encoder whose layers run through torch.compile (Inductor, real, on the CPU here) embeds as before.

Every test resets torch.compile's cache: every layer of every model shares nn.Module's call code,
whose cache has a recompile limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from tests.integration.test_batch_plan import MIXED_TEXTS
from tests.support.compile_backends import failing_backend
from tests.support.tiny_models import build_tiny_qwen3


@pytest.fixture(scope="module")
def tiny_qwen3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-layers"))


@pytest.fixture
def plain(tiny_qwen3_path: Path) -> Iterator[TextEncoder]:
    """Layers as transformers runs them; a test compiles them itself."""
    encoder = TextEncoder.load(str(tiny_qwen3_path), device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24))
    yield encoder
    encoder.uncompile_layers()
    torch._dynamo.reset()


def spoiling_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compiles to something wrong: each layer's output features scaled from -1 to 1, as a faulty kernel might give."""

    def spoil(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() == 3:
            return t * torch.linspace(-1.0, 1.0, t.shape[-1], dtype=t.dtype)
        return t

    def run(*args: Any) -> Any:
        out = graph.forward(*args)
        return type(out)(spoil(t) for t in out) if isinstance(out, (tuple, list)) else spoil(out)

    return run


def test_compiled_layers_give_the_models_own_vectors(plain: TextEncoder) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)  # packed rows of several texts, and lone texts
    assert plain.compile_layers() == plain.model.config.num_hidden_layers == plain.compiled_layer_count
    got = plain.encode_queries(MIXED_TEXTS)
    assert np.sum(got * expected, axis=1).min() > 0.9999


def test_a_compile_that_gives_other_embeddings_is_undone_at_load(plain: TextEncoder, caplog: pytest.LogCaptureFixture) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)
    assert plain.compile_layers(backend=spoiling_backend) == 0 and plain.compiled_layer_count == 0
    assert "compiled layers are off: embeddings with them differ" in caplog.text
    assert all(layer._compiled_call_impl is None for layer in plain.model.layers)
    np.testing.assert_allclose(plain.encode_queries(MIXED_TEXTS), expected, atol=1e-6)


def test_a_compile_that_fails_leaves_the_encoder_running_as_before(plain: TextEncoder, caplog: pytest.LogCaptureFixture) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)
    assert plain.compile_layers(backend=failing_backend) == 0
    assert "compiled layers are off: compiling them failed" in caplog.text
    np.testing.assert_allclose(plain.encode_queries(MIXED_TEXTS), expected, atol=1e-6)


def test_auto_leaves_a_model_on_the_cpu_as_transformers_wrote_it(tiny_qwen3_path: Path) -> None:
    encoder = TextEncoder.load(
        str(tiny_qwen3_path), device="cpu", options=EngineOptions(compiled_layers="auto", forward_overhead_tokens=60.0)
    )
    assert encoder.compiled_layer_count == 0
    assert all(layer._compiled_call_impl is None for layer in encoder.model.layers)
