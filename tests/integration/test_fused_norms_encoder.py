"""A Qwen3 encoder with its RMSNorms on torch's fused op embeds as with transformers' own (CPU: torch composes the op)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Qwen3Model

from mcp_classifier.engine.accel import fused_norms as fused_norms_module
from mcp_classifier.engine.accel.fused_norms import fuse_rms_norms, rms_norm_epsilon
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions, Switch
from tests.integration.test_batch_plan import MIXED_TEXTS
from tests.support.tiny_models import build_tiny_qwen3

NORMS_PER_LAYER = 4  # Qwen3: before attention, before the MLP, every head's queries, every head's keys


@pytest.fixture(scope="module")
def tiny_qwen3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Norm weights away from their initial ones, so a formula that ignored them would show."""
    path = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-norms"))
    model = Qwen3Model.from_pretrained(path)
    torch.manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if rms_norm_epsilon(module) is not None:
                module.weight.uniform_(0.5, 1.5)
    model.save_pretrained(path)
    return path


def encoder(path: Path, fused_norms: Switch) -> TextEncoder:
    return TextEncoder.load(
        str(path), device="cpu", options=EngineOptions(fused_norms=fused_norms, forward_overhead_tokens=60.0, pack_width=24)
    )


def test_every_qwen3_norm_runs_fused_and_the_embeddings_stay_the_models_own(tiny_qwen3_path: Path) -> None:
    fused, plain = encoder(tiny_qwen3_path, "on"), encoder(tiny_qwen3_path, "off")
    layers = fused.model.config.num_hidden_layers
    assert fused.fused_norm_layers == NORMS_PER_LAYER * layers + 1  # and the final norm
    assert plain.fused_norm_layers == 0
    cosines = np.sum(fused.encode_queries(MIXED_TEXTS) * plain.encode_queries(MIXED_TEXTS), axis=1)
    assert cosines.min() > 0.9999


def test_auto_leaves_a_model_on_the_cpu_as_transformers_wrote_it(tiny_qwen3_path: Path) -> None:
    assert encoder(tiny_qwen3_path, "auto").fused_norm_layers == 0


def test_an_encoder_without_rms_norms_has_nothing_to_fuse() -> None:
    minilm = TextEncoder.load("builtin:minilm", device="cpu", options=EngineOptions(fused_norms="on", forward_overhead_tokens=60.0))
    assert minilm.fused_norm_layers == 0


def test_fused_layers_go_back_where_whole_embeddings_would_drift(
    tiny_qwen3_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fuse_with_a_wrong_epsilon(model: torch.nn.Module, activations: torch.dtype) -> tuple[int, int]:
        swapped = fuse_rms_norms(model, activations)
        for module in model.modules():
            if hasattr(module, "_fused_rms_norm_epsilon"):
                module._fused_rms_norm_epsilon = 100.0
        return swapped

    monkeypatch.setattr(fused_norms_module, "fuse_rms_norms", fuse_with_a_wrong_epsilon)
    drifted = encoder(tiny_qwen3_path, "on")
    assert drifted.fused_norm_layers == 0
    assert "fused norms are off" in caplog.text
    assert not any(hasattr(m, "_fused_rms_norm_epsilon") for m in drifted.model.modules())
    plain = encoder(tiny_qwen3_path, "off")
    np.testing.assert_allclose(drifted.encode_queries(MIXED_TEXTS), plain.encode_queries(MIXED_TEXTS), atol=1e-6)
