"""A Qwen3 encoder whose rotary embeddings run through torch.compile (Inductor, real, on the CPU here) embeds as before.

The swap is module-wide (transformers calls the function by its module's name), so every test puts
transformers' own back, and checks it did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers.models.qwen3 import modeling_qwen3

from mcp_classifier.engine.accel.fused_rotary import ROTARY_FUNCTION, CompiledRotary, unfuse_rotary
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from tests.integration.test_batch_plan import MIXED_TEXTS
from tests.support.compile_backends import failing_backend
from tests.support.tiny_models import build_tiny_qwen3


@pytest.fixture(scope="module")
def tiny_qwen3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-rotary"))


@pytest.fixture
def plain(tiny_qwen3_path: Path) -> Iterator[TextEncoder]:
    """Rotary embeddings as transformers applies them; a test fuses them itself."""
    original = getattr(modeling_qwen3, ROTARY_FUNCTION)
    encoder = TextEncoder.load(str(tiny_qwen3_path), device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24))
    yield encoder
    unfuse_rotary(encoder.model)
    torch._dynamo.reset()  # torch.compile's cache for the function has a recompile limit
    assert getattr(modeling_qwen3, ROTARY_FUNCTION) is original


def spoiling_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Compiles to something wrong: the queries 30 times too large, as a faulty kernel might give."""

    def run(*args: Any) -> Any:
        out = graph.forward(*args)
        return type(out)(t * 30 if i == 0 else t for i, t in enumerate(out))

    return run


def test_compiled_rotary_embeddings_give_the_models_own_vectors(plain: TextEncoder) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)  # packed rows of several texts, and lone texts
    assert plain.fuse_rotary() == plain.model.config.num_hidden_layers == plain.fused_rotary_layers
    assert isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    got = plain.encode_queries(MIXED_TEXTS)
    assert np.sum(got * expected, axis=1).min() > 0.9999


def test_a_compile_that_gives_other_embeddings_is_undone_at_load(plain: TextEncoder, caplog: pytest.LogCaptureFixture) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)
    assert plain.fuse_rotary(backend=spoiling_backend) == 0 and plain.fused_rotary_layers == 0
    assert "fused rotary embeddings are off: embeddings with them differ" in caplog.text
    assert not isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    np.testing.assert_allclose(plain.encode_queries(MIXED_TEXTS), expected, atol=1e-6)


def test_a_compile_that_fails_leaves_the_encoder_running_as_before(plain: TextEncoder, caplog: pytest.LogCaptureFixture) -> None:
    expected = plain.encode_queries(MIXED_TEXTS)
    assert plain.fuse_rotary(backend=failing_backend) == 0
    assert "fused rotary embeddings are off: compiling them failed" in caplog.text
    assert not isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    np.testing.assert_allclose(plain.encode_queries(MIXED_TEXTS), expected, atol=1e-6)


def test_auto_leaves_a_model_on_the_cpu_as_transformers_wrote_it_and_minilm_has_nothing_to_fuse(tiny_qwen3_path: Path) -> None:
    auto = TextEncoder.load(str(tiny_qwen3_path), device="cpu", options=EngineOptions(fused_rotary="auto", forward_overhead_tokens=60.0))
    assert auto.fused_rotary_layers == 0
    assert not isinstance(getattr(modeling_qwen3, ROTARY_FUNCTION), CompiledRotary)
    minilm = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(fused_rotary="on", forward_overhead_tokens=60.0))
    assert minilm.fused_rotary_layers == 0
