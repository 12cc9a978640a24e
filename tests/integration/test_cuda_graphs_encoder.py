"""The encoder's graphed forward gives the vectors of texts run alone, on an encoder (MiniLM) and a decoder (Qwen3) alike.

These run on the CPU with CUDA's capture replaced (no GPU here: the mocked capture reruns the
real model into the graph's static output), so what is checked is the encoder's side: packed
inputs, buckets padded with pads of their own, outputs copied per call, the load-time check.
The real capture runs in tests/integration/test_gpu_path.py on a GPU host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mcp_classifier.engine import loading
from mcp_classifier.engine.accel.cuda_graphs import GraphedForward, Replay, RunModel
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions
from tests.integration.test_batch_plan import MIXED_TEXTS, reference_vectors
from tests.integration.test_packing import _CountsItsOwnPositions
from tests.support.tiny_models import build_tiny_qwen3
from tests.unit.test_cuda_graphs import MockedCudaGraphCapture


@pytest.fixture(scope="module")
def graphed_minilm() -> TextEncoder:
    encoder = TextEncoder.load(
        "builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8)
    )
    assert encoder.enable_cuda_graphs(capture=MockedCudaGraphCapture())
    return encoder


def test_graphs_of_every_row_count_at_query_widths_are_captured_at_load_with_mocked_cuda_graph(graphed_minilm: TextEncoder) -> None:
    graphs = graphed_minilm.cuda_graphs
    assert graphs is not None
    assert {(rows, width) for rows in (1, 2, 4, 8) for width in (16, 32, 48, 64)} <= set(graphs.shapes)


@pytest.fixture(scope="module")
def graphed_tiny_qwen3(tmp_path_factory: pytest.TempPathFactory) -> TextEncoder:
    path: Path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-graphs"))
    encoder = TextEncoder.load(str(path), device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=0, batch_size=8))
    assert encoder.enable_cuda_graphs(capture=MockedCudaGraphCapture())
    return encoder


@pytest.mark.parametrize("encoder_name", ["graphed_minilm", "graphed_tiny_qwen3"])
def test_graphed_batches_give_each_texts_own_vector_with_mocked_cuda_graph(encoder_name: str, request: pytest.FixtureRequest) -> None:
    """Mean pooling over a bidirectional mask (MiniLM, rows packed 24 wide) and last token over a causal one (Qwen3, a text a row)."""
    encoder: TextEncoder = request.getfixturevalue(encoder_name)
    graphs = encoder.cuda_graphs
    assert graphs is not None
    replays = _replays(graphs)
    texts = MIXED_TEXTS * 3  # more texts than one call takes
    got = encoder.encode(texts)
    assert encoder.last_batch_packed and encoder.last_forward_calls > 1
    calls = encoder.last_forward_calls
    assert _replays(graphs) == replays + calls  # every call ran through a graph
    np.testing.assert_allclose(got, reference_vectors(encoder, texts), atol=1e-5)
    lone = encoder.encode(["why is the sky blue"])
    assert _replays(graphs) == replays + calls + 1
    np.testing.assert_allclose(lone, reference_vectors(encoder, ["why is the sky blue"]), atol=1e-5)


def test_the_loaded_model_records_no_autograd_history_with_mocked_cuda_graph(graphed_tiny_qwen3: TextEncoder) -> None:
    """No forward of the encoder's, graphed or not, at load or later, keeps its activations for a backward pass."""
    assert not any(p.requires_grad for p in graphed_tiny_qwen3.model.parameters())
    graphs = graphed_tiny_qwen3.cuda_graphs
    assert graphs is not None
    capture = graphs._capture
    assert isinstance(capture, MockedCudaGraphCapture) and capture.outputs
    assert all(out.grad_fn is None for out in capture.outputs)


def _replays(graphs: GraphedForward) -> int:
    capture = graphs._capture
    assert isinstance(capture, MockedCudaGraphCapture)
    return capture.replays


def test_a_batch_past_the_graphs_limit_runs_eagerly_and_alike_with_mocked_cuda_graph() -> None:
    encoder = TextEncoder.load(
        "builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=24, batch_size=8)
    )
    assert encoder.enable_cuda_graphs(capture=MockedCudaGraphCapture())
    graphs = encoder.cuda_graphs
    assert graphs is not None
    graphs.max_graphs = len(graphs.shapes)  # as if every bucket allowed were taken
    captured = list(graphs.shapes)
    long_text = "word " * 300  # 256 tokens after truncation: a bucket not captured yet
    got = encoder.encode([long_text])
    assert graphs.shapes == captured
    np.testing.assert_allclose(got, reference_vectors(encoder, [long_text]), atol=1e-5)


def test_graphs_stay_off_for_a_model_that_ignores_position_ids_with_mocked_cuda_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """The graphs take packed inputs: a model that counts its own positions would embed every text after the first wrongly."""
    auto_model = loading.AutoModel
    real_from_pretrained = auto_model.from_pretrained
    monkeypatch.setattr(auto_model, "from_pretrained", lambda *a, **k: _CountsItsOwnPositions(real_from_pretrained(*a, **k)))
    encoder = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=1.0, pack_width=64))
    assert not encoder.enable_cuda_graphs(capture=MockedCudaGraphCapture())
    assert encoder.cuda_graphs is None
    np.testing.assert_allclose(encoder.encode(MIXED_TEXTS), reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)


def test_a_forward_that_cannot_be_captured_leaves_graphs_off_with_mocked_cuda_graph() -> None:
    """A host sync inside a forward makes CUDA's capture raise; the encoder then keeps running eagerly."""

    def refuse(run: RunModel, inputs: torch.Tensor) -> tuple[Replay, torch.Tensor]:
        raise RuntimeError("operation not permitted when stream is capturing")

    encoder = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=1.0, pack_width=64))
    assert not encoder.enable_cuda_graphs(capture=refuse)
    assert encoder.cuda_graphs is None
    np.testing.assert_allclose(encoder.encode(MIXED_TEXTS), reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)


def test_a_capture_failing_while_warming_at_load_leaves_graphs_off_with_mocked_cuda_graph() -> None:
    """The probe's one shape captured; a bigger one, warmed at load, did not."""
    mocked = MockedCudaGraphCapture()

    def refuse_past_the_first(run: RunModel, inputs: torch.Tensor) -> tuple[Replay, torch.Tensor]:
        if mocked.captured:
            raise RuntimeError("out of memory while capturing")
        return mocked(run, inputs)

    encoder = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=1.0, pack_width=64))
    assert not encoder.enable_cuda_graphs(capture=refuse_past_the_first)
    assert encoder.cuda_graphs is None
    np.testing.assert_allclose(encoder.encode(MIXED_TEXTS), reference_vectors(encoder, MIXED_TEXTS), atol=1e-5)


def test_graphs_are_off_on_cpu_unless_asked_and_asking_there_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    assert TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(cuda_graphs="auto")).cuda_graphs is None
    assert TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(cuda_graphs="on")).cuda_graphs is None
    assert "cuda_graphs is on but the model runs on cpu" in caplog.text


def test_graphed_batches_give_each_text_its_own_token_vectors_with_mocked_cuda_graph(graphed_minilm: TextEncoder) -> None:
    """Token matching reads the graph's static output: each text's tokens, at its place in its bucket's packed row."""
    graphs = graphed_minilm.cuda_graphs
    assert graphs is not None
    replays = _replays(graphs)
    texts = MIXED_TEXTS * 3
    _, graphed = graphed_minilm.encode_with_tokens(texts, query=True)
    assert _replays(graphs) > replays  # the tokens came out of graphs
    eager = TextEncoder.load(
        "builtin:minilm", device="cpu", options=EngineOptions(forward_overhead_tokens=60.0, pack_width=0, batch_size=8)
    )
    _, padded = eager.encode_with_tokens(texts, query=True)
    for got, expected in zip(graphed, padded):
        assert got.shape == expected.shape
        np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-4)
