"""loadtests.bench_gpu on the CPU: each row times the model's part and the whole call, per batch, beside the floor."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtests import bench_gpu
from tests.support.tiny_models import build_tiny_qwen3


def test_the_embedder_bench_reports_each_batch_size_against_the_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gpu.json"
    args = ["--device", "cpu", "--batch-sizes", "1,8", "--query-tokens", "16", "--texts", "16", "--seconds", "0.05", "--json", str(out)]
    assert bench_gpu.main(args) == 0
    report = orjson.loads(out.read_bytes())
    assert [row["batch_size"] for row in report["rows"]] == [1, 8]
    for row in report["rows"]:
        assert row["forward"] == "eager"  # no CUDA here: no graph rows
        assert abs(row["query_tokens"] - 16) <= 2  # texts of the asked length, the instruction prefix counted
        assert row["tokens_per_s"] > 0 and row["texts_per_s_with_tokenizing"] > 0
        assert row["share"] == pytest.approx(row["tokens_per_s"] / report["floor_tokens_per_s"])
    batch8 = next(r for r in report["rows"] if r["batch_size"] == 8)
    assert batch8["ms_per_batch"] > next(r for r in report["rows"] if r["batch_size"] == 1)["ms_per_batch"]
    printed = capsys.readouterr().out
    assert "compute floor" in printed and "| 16 | 8 | eager |" in printed


def test_the_bench_times_transformers_norms_beside_torchs_fused_ones(tmp_path: Path) -> None:
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    out = tmp_path / "norms.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4", "--query-tokens", "16", "--texts", "8"]
    assert bench_gpu.main([*args, "--seconds", "0.05", "--fused-norms", "both", "--json", str(out)]) == 0
    rows = orjson.loads(out.read_bytes())["rows"]
    assert [row["forward"] for row in rows] == ["eager", "eager, fused norms"]
    assert all(row["tokens_per_s"] > 0 for row in rows)
