"""The GPU path. The real test runs only where CUDA is present (visibly skipped here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mcp_classifier.engine.encoder import TextEncoder, pick_dtype
from mcp_classifier.engine.options import EngineOptions
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier
from tests.integration.test_batch_plan import MIXED_TEXTS
from tests.support.tiny_models import build_tiny_qwen3

TEXTS = ["what is the derivative of sin x", "how do I merge two git branches", "who was the first roman emperor", "hi, how are you"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: the GPU path runs only on a GPU host")
def test_cuda_runs_in_half_precision_and_agrees_with_cpu() -> None:
    gpu = build_classifier(Settings(device="cuda"))
    cpu = build_classifier(Settings(device="cpu"))
    assert gpu.encoder.dtype in (torch.float16, torch.bfloat16)
    assert next(gpu.encoder.model.parameters()).is_cuda
    for g, c in zip(gpu.classify(TEXTS), cpu.classify(TEXTS)):
        assert g.class_index == c.class_index
        np.testing.assert_allclose(g.probabilities, c.probabilities, atol=0.05)


def test_dtype_choice_with_mocked_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU here: torch's bf16 capability check is mocked to show how auto picks the dtype."""
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert pick_dtype("auto", torch.device("cuda")) is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert pick_dtype("auto", torch.device("cuda")) is torch.float16
    assert pick_dtype("auto", torch.device("cpu")) is torch.float32
    assert pick_dtype("float16", torch.device("cpu")) is torch.float16


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: real CUDA graphs run only on a GPU host")
def test_cuda_graphs_are_on_by_default_on_cuda_and_agree_with_eager_forwards(tmp_path: Path) -> None:
    path = str(build_tiny_qwen3(tmp_path))
    graphed = TextEncoder.load(path, device="cuda", options=EngineOptions(cuda_graphs="auto", batch_size=8))
    eager = TextEncoder.load(path, device="cuda", options=EngineOptions(cuda_graphs="off", batch_size=8))
    assert graphed.cuda_graphs is not None and eager.cuda_graphs is None
    texts = MIXED_TEXTS * 3
    got, expected = graphed.encode(texts), eager.encode(texts)
    assert np.min(np.sum(got * expected, axis=1)) > 0.999
    assert graphed.cuda_graphs.shapes  # the batches ran through captured graphs


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine: torch's fused rms_norm kernel runs only on a GPU host"
)
def test_fused_norms_are_on_by_default_on_cuda_and_agree_with_transformers_norms(tmp_path: Path) -> None:
    path = str(build_tiny_qwen3(tmp_path))
    fused = TextEncoder.load(path, device="cuda", options=EngineOptions(fused_norms="auto", cuda_graphs="off"))
    plain = TextEncoder.load(path, device="cuda", options=EngineOptions(fused_norms="off", cuda_graphs="off"))
    assert fused.fused_norm_layers == 4 * fused.model.config.num_hidden_layers + 1 and plain.fused_norm_layers == 0
    texts = MIXED_TEXTS * 3
    assert np.min(np.sum(fused.encode(texts) * plain.encode(texts), axis=1)) > 0.999


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: real CUDA graphs run only on a GPU host")
def test_cuda_graphs_captured_at_load_keep_no_activations_alive(tmp_path: Path) -> None:
    """A graph's output lives as long as the graph: with autograd history it held every layer's activations."""
    graphed = TextEncoder.load(str(build_tiny_qwen3(tmp_path)), device="cuda", options=EngineOptions(cuda_graphs="auto", batch_size=8))
    graphs = graphed.cuda_graphs
    assert graphs is not None and len(graphs.shapes) >= 16  # rows 1..8 at the four query widths, warmed at load
    assert all(graph.hidden.grad_fn is None and not graph.hidden.requires_grad for graph in graphs._graphs.values())


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: Triton kernels compile only on a GPU host")
def test_fused_rotary_compiles_on_cuda_and_agrees_with_transformers_inside_cuda_graphs(tmp_path: Path) -> None:
    from transformers.models.qwen3 import modeling_qwen3

    from mcp_classifier.engine.accel.fused_rotary import unfuse_rotary

    path = str(build_tiny_qwen3(tmp_path))
    plain = TextEncoder.load(path, device="cuda", options=EngineOptions(cuda_graphs="auto", batch_size=8))
    texts = MIXED_TEXTS * 3
    expected = plain.encode(texts)
    fused = TextEncoder.load(path, device="cuda", options=EngineOptions(cuda_graphs="auto", fused_rotary="on", batch_size=8))
    try:
        assert fused.fused_rotary_layers == fused.model.config.num_hidden_layers
        assert fused.cuda_graphs is not None  # captured with the compiled kernel inside
        assert np.min(np.sum(fused.encode(texts) * expected, axis=1)) > 0.999
    finally:
        unfuse_rotary(fused.model)
        torch._dynamo.reset()
    assert not hasattr(modeling_qwen3.apply_rotary_pos_emb, "device_types")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: Triton kernels compile only on a GPU host")
def test_compiled_layers_compile_on_cuda_and_agree_with_transformers_inside_cuda_graphs(tmp_path: Path) -> None:
    path = str(build_tiny_qwen3(tmp_path))
    plain = TextEncoder.load(path, device="cuda", options=EngineOptions(cuda_graphs="auto", batch_size=8))
    texts = MIXED_TEXTS * 3
    expected = plain.encode(texts)
    compiled = TextEncoder.load(
        path, device="cuda", options=EngineOptions(cuda_graphs="auto", fused_norms="auto", compiled_layers="auto", batch_size=8)
    )
    try:
        assert compiled.compiled_layer_count == compiled.model.config.num_hidden_layers
        assert compiled.cuda_graphs is not None  # captured with the compiled kernels inside
        assert np.min(np.sum(compiled.encode(texts) * expected, axis=1)) > 0.999
    finally:
        compiled.uncompile_layers()
        torch._dynamo.reset()
