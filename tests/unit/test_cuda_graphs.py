"""CUDA graph bucketing: shapes, pads in segments of their own, one capture per bucket, caps that fall back to eager.

No GPU here: CUDA's capture is replaced by one that reruns the forward into the same static
output (the mocked capture), which keeps what a graph promises its caller: the static inputs are
what it reads, and every replay rewrites one output tensor.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcp_classifier.engine.accel.cuda_graphs import GraphedForward, Replay, RunModel, bucket_inputs, row_bucket, width_bucket


def test_rows_round_to_powers_of_two_and_widths_to_16_then_64() -> None:
    assert [row_bucket(n) for n in (1, 2, 3, 5, 8, 9, 33, 64)] == [1, 2, 4, 8, 8, 16, 64, 64]
    assert [width_bucket(w) for w in (1, 16, 17, 33, 64, 65, 130, 256)] == [16, 16, 32, 48, 64, 128, 192, 256]


def test_a_batch_sits_in_the_corner_and_every_filler_is_a_pad_of_its_own() -> None:
    ids = np.array([[5, 6, 7], [8, 9, 0]])
    positions = np.array([[0, 1, 0], [0, 1, 0]])
    segments = np.array([[0, 0, 1], [2, 2, -6]])
    out = bucket_inputs(ids, positions, segments, (4, 16), pad_id=0)
    assert out.shape == (3, 4, 16)
    np.testing.assert_array_equal(out[:, :2, :3], np.stack([ids, positions, segments]))
    filler = np.ones((4, 16), dtype=bool)
    filler[:2, :3] = False
    assert (out[0][filler] == 0).all() and (out[1][filler] == 0).all()
    filler_segments = out[2][filler]
    assert (filler_segments < 0).all() and len(set(filler_segments.tolist())) == filler.sum()  # no two fillers share a segment


def _forward_sums_each_row(ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
    """[rows, width, 2]: each token's id and its row's sum of real (segment >= 0) ids."""
    real = torch.where(segments >= 0, ids, torch.zeros_like(ids))
    return torch.stack([ids, real.sum(dim=1, keepdim=True).expand_as(ids)], dim=-1).float()


class MockedCudaGraphCapture:
    """Stands in for torch.cuda.graph (no GPU here): replay reruns the forward into the captured output tensor."""

    def __init__(self) -> None:
        self.captured: list[tuple[int, ...]] = []
        self.outputs: list[torch.Tensor] = []  # each graph's static output, as the graph keeps it
        self.replays = 0

    def __call__(self, run: RunModel, inputs: torch.Tensor) -> tuple[Replay, torch.Tensor]:
        self.captured.append(tuple(inputs.shape[1:]))
        hidden = run(inputs[0], inputs[1], inputs[2])
        self.outputs.append(hidden)

        def replay() -> None:
            self.replays += 1
            hidden.copy_(run(inputs[0], inputs[1], inputs[2]))

        return replay, hidden


def _batch(rows: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, 100, size=(rows, width))
    positions = np.tile(np.arange(width), (rows, 1))
    segments = np.repeat(np.arange(rows)[:, None], width, axis=1)
    return ids, positions, segments


def test_each_bucket_is_captured_once_and_replays_give_each_batch_its_own_result_with_mocked_cuda_graph() -> None:
    capture = MockedCudaGraphCapture()
    graphs = GraphedForward(_forward_sums_each_row, torch.device("cpu"), pad_id=0, max_rows=64, max_width=256, capture=capture)
    first = _batch(3, 20, seed=1)
    second = _batch(4, 30, seed=2)  # the same bucket: 4 rows x 32
    out_first = graphs(*first)
    out_second = graphs(*second)
    assert capture.captured == [(4, 32)] and graphs.shapes == [(4, 32)]
    assert out_first is not None and out_second is not None
    assert out_first.shape == (3, 20, 2) and out_second.shape == (4, 30, 2)
    # The first result is a copy: the second replay rewrote the graph's output, not it.
    np.testing.assert_array_equal(out_first.numpy(), _forward_sums_each_row(*(torch.from_numpy(a) for a in first)).numpy())
    np.testing.assert_array_equal(out_second.numpy(), _forward_sums_each_row(*(torch.from_numpy(a) for a in second)).numpy())
    graphs(*_batch(1, 8, seed=3))
    assert graphs.shapes == [(4, 32), (1, 16)]


def test_shapes_past_the_caps_and_graphs_past_the_limit_run_eagerly_with_mocked_cuda_graph() -> None:
    capture = MockedCudaGraphCapture()
    graphs = GraphedForward(_forward_sums_each_row, torch.device("cpu"), pad_id=0, max_rows=8, max_width=64, max_graphs=2, capture=capture)
    assert graphs(*_batch(9, 10, seed=0)) is None  # 16 rows > 8
    assert graphs(*_batch(2, 70, seed=0)) is None  # 128 wide > 64
    assert graphs(*_batch(1, 10, seed=0)) is not None
    assert graphs(*_batch(2, 10, seed=0)) is not None
    assert graphs(*_batch(4, 10, seed=0)) is None  # a third bucket, past max_graphs
    assert capture.captured == [(1, 16), (2, 16)]


def test_warming_captures_every_row_bucket_at_each_width_before_any_request_with_mocked_cuda_graph() -> None:
    capture = MockedCudaGraphCapture()
    graphs = GraphedForward(_forward_sums_each_row, torch.device("cpu"), pad_id=0, max_rows=6, max_width=40, capture=capture)
    graphs.warm([16, 20, 64])  # 20 shares 32's bucket; 64 is past the width cap
    assert graphs.shapes == [(1, 16), (2, 16), (4, 16), (8, 16), (1, 32), (2, 32), (4, 32), (8, 32)]
    graphs(*_batch(3, 30, seed=0))
    assert len(capture.captured) == 8 and capture.replays == 1  # served by a warmed graph, nothing captured on the request
    small = GraphedForward(_forward_sums_each_row, torch.device("cpu"), pad_id=0, max_rows=64, max_width=64, max_graphs=3, capture=capture)
    small.warm([16, 32])
    assert len(small.shapes) == 3  # never past max_graphs


def test_graphs_warmed_outside_inference_mode_keep_no_autograd_history_with_mocked_cuda_graph() -> None:
    """A graph's output lives as long as the graph; with autograd history it would keep every layer's activations too.

    On an H200 that was 25.6 GB for one bucket of 256 rows x 64 tokens of Qwen3-Embedding-0.6B
    (docs/decisions/0017-cuda-graphs.md). Here a trainable layer stands in for the model.
    """
    layer = torch.nn.Linear(2, 4)
    assert layer.weight.requires_grad

    def forward(ids: torch.Tensor, positions: torch.Tensor, segments: torch.Tensor) -> torch.Tensor:
        return torch.relu(layer(_forward_sums_each_row(ids, positions, segments)))

    capture = MockedCudaGraphCapture()
    graphs = GraphedForward(forward, torch.device("cpu"), pad_id=0, max_rows=4, max_width=16, capture=capture)
    assert torch.is_grad_enabled()  # warm() runs at load, where nothing turned autograd off
    graphs.warm([16])
    graphs(*_batch(8, 16, seed=1))  # past the row cap: None, nothing captured
    graphs(*_batch(3, 5, seed=2))
    assert len(capture.outputs) == 3
    assert all(out.grad_fn is None and not out.requires_grad for out in capture.outputs)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: real graph capture runs only on a GPU host")
def test_a_real_cuda_graph_replays_new_inputs() -> None:
    graphs = GraphedForward(_forward_sums_each_row, torch.device("cuda"), pad_id=0, max_rows=8, max_width=64)
    for seed in range(3):
        batch = _batch(3, 12, seed)
        out = graphs(*batch)
        assert out is not None
        expected = _forward_sums_each_row(*(torch.from_numpy(a) for a in batch))
        np.testing.assert_array_equal(out.cpu().numpy(), expected.numpy())
    assert graphs.shapes == [(4, 16)]
