"""loadtests.bench_gpu on the CPU: each row times the model's part and the whole call, per batch, beside the floor."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import torch

from loadtests import bench_gpu, graph_memory
from tests.support.tiny_models import build_tiny_qwen3


def test_the_embedder_bench_reports_each_batch_size_against_the_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bench switches the tokenizer's pool on and off for its rows: the test session's setting comes back afterwards.
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("RAYON_NUM_THREADS", "2")
    out = tmp_path / "gpu.json"
    # Eight texts: a timed pass is one batch of 8, or eight lone texts: every pass at batch 1 is eight forwards.
    args = ["--device", "cpu", "--batch-sizes", "1,8", "--query-tokens", "16", "--texts", "8", "--seconds", "0.05", "--json", str(out)]
    assert bench_gpu.main(args) == 0
    report = orjson.loads(out.read_bytes())
    assert [row["batch_size"] for row in report["rows"]] == [1, 8]
    for row in report["rows"]:
        assert row["forward"] == "eager"  # no CUDA here: no graph rows
        assert abs(row["query_tokens"] - 16) <= 2  # texts of the asked length, the instruction prefix counted
        assert row["tokens_per_s"] > 0 and row["texts_per_s_with_tokenizing"] > 0
        assert row["texts_per_s_tokenizing_on_one_thread"] > 0  # beside the pool, as a replica without one would
        assert row["share"] == pytest.approx(row["tokens_per_s"] / report["floor_tokens_per_s"])
    assert all(row["ms_per_batch"] > 0 for row in report["rows"])  # timed, but never judged: a busy host reorders them
    # On a CPU the pool is as many threads as torch runs on, as the service's auto sizes it there.
    assert report["tokenizer_pool"] == torch.get_num_threads()
    printed = capsys.readouterr().out
    assert "compute floor" in printed and "| 16 | 8 | eager |" in printed
    assert f"tokenizer's pool of {torch.get_num_threads()} threads" in printed


def test_the_bench_times_transformers_norms_beside_torchs_fused_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_gpu, "PROFILE_ROWS", 1000)  # every op listed, so the norms' own can be looked for
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    out = tmp_path / "norms.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4", "--query-tokens", "16", "--texts", "8"]
    assert bench_gpu.main([*args, "--seconds", "0.05", "--fused-norms", "both", "--profile-batch", "4", "--json", str(out)]) == 0
    report = orjson.loads(out.read_bytes())
    assert [row["forward"] for row in report["rows"]] == ["eager", "eager, fused norms"]
    assert all(row["tokens_per_s"] > 0 for row in report["rows"])
    # One batch of each forward profiled: on a CPU, ops by their own CPU time, the biggest first.
    profiles = report["profiles"]
    assert set(profiles) == {"eager", "eager, fused norms"}
    top_ops = {forward: [op["name"] for op in profile["top"]] for forward, profile in profiles.items()}
    assert "aten::rms_norm" not in top_ops["eager"]
    assert "aten::rms_norm" in top_ops["eager, fused norms"]
    for profile in profiles.values():
        assert profile["batch_size"] == 4 and profile["measured"] == "CPU ops"
        times = [op["ms"] for op in profile["top"]]
        assert times == sorted(times, reverse=True) and times[0] > 0


@pytest.mark.cuda  # skips where a CUDA device is: the GPU host measures the real thing
def test_the_graph_memory_check_says_it_needs_a_gpu_where_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the check runs for real in the GPU host's graph-memory stage")
    assert graph_memory.main(["--batch-sizes", "8"]) == 2
    assert "only be measured on a GPU host" in capsys.readouterr().err


def test_the_bench_times_transformers_rotary_embeddings_beside_compiled_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.qwen3 import modeling_qwen3

    # The bench leaves the compiled function in transformers' module: put transformers' own back afterwards.
    monkeypatch.setattr(modeling_qwen3, "apply_rotary_pos_emb", modeling_qwen3.apply_rotary_pos_emb)
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    out = tmp_path / "rotary.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4", "--query-tokens", "16", "--texts", "8", "--seconds", "0.05"]
    try:
        assert bench_gpu.main([*args, "--fused-rotary", "both", "--json", str(out)]) == 0
    finally:
        torch._dynamo.reset()
    report = orjson.loads(out.read_bytes())
    assert [row["forward"] for row in report["rows"]] == ["eager", "eager, fused rotary"]
    assert all(row["tokens_per_s"] > 0 for row in report["rows"])


def test_the_bench_times_copied_keys_beside_grouped_ones_and_puts_the_switch_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(bench_gpu, "PROFILE_ROWS", 1000)  # every op listed, so the copies can be counted
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")  # 4 query heads over 2 key/value heads
    out = tmp_path / "gqa.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4", "--query-tokens", "16", "--texts", "8", "--seconds", "0.05"]
    assert bench_gpu.FORCE_GQA_ENV not in os.environ
    assert bench_gpu.main([*args, "--sdpa-gqa", "both", "--profile-batch", "4", "--json", str(out)]) == 0
    report = orjson.loads(out.read_bytes())
    assert [row["forward"] for row in report["rows"]] == ["eager", "eager, SDPA GQA"]
    assert all(row["tokens_per_s"] > 0 for row in report["rows"])
    # The copies are gone where SDPA takes the groups: transformers clones keys and values once a layer each.
    clones = {forward: {op["name"]: op["calls"] for op in p["top"]}.get("aten::clone", 0) for forward, p in report["profiles"].items()}
    layers = 2  # build_tiny_qwen3's
    assert clones == {"eager": 2 * layers, "eager, SDPA GQA": 0}
    assert bench_gpu.FORCE_GQA_ENV not in os.environ  # transformers reads it on every call: never left behind


def test_the_bench_times_compiled_layers_beside_the_models_own_and_undoes_them(tmp_path: Path) -> None:
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    out = tmp_path / "layers.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4", "--query-tokens", "16", "--texts", "8", "--seconds", "0.05"]
    try:
        assert bench_gpu.main([*args, "--compiled-layers", "both", "--json", str(out)]) == 0
    finally:
        torch._dynamo.reset()
    report = orjson.loads(out.read_bytes())
    assert [row["forward"] for row in report["rows"]] == ["eager", "eager, compiled layers"]
    assert all(row["tokens_per_s"] > 0 for row in report["rows"])


def test_the_bench_times_calls_in_flight_where_there_are_enough_texts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    out = tmp_path / "in-flight.json"
    args = ["--model", str(model), "--device", "cpu", "--batch-sizes", "4,8", "--query-tokens", "16", "--texts", "12", "--seconds", "0.05"]
    assert bench_gpu.main([*args, "--calls-in-flight", "2", "--json", str(out)]) == 0
    rows = {row["batch_size"]: row for row in orjson.loads(out.read_bytes())["rows"]}
    assert rows[4]["share_in_flight"] > 0  # 12 texts: two batches of 4 in flight
    assert rows[8]["share_in_flight"] is None  # two batches of 8 need 16 texts: said, not made up
    printed = capsys.readouterr().out
    assert "share, 2 calls in flight" in printed and "with 2 calls in flight: best" in printed
