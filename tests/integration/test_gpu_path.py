"""The GPU path. The real test runs only where CUDA is present (visibly skipped here)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mcp_classifier.core.encoder import pick_dtype
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

TEXTS = ["what is the derivative of sin x", "how do I merge two git branches", "who was the first roman emperor", "hi, how are you"]


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
