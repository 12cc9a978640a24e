"""The paths bench reads each path against the floor of the arithmetic its model runs in (pure table rules, no servers)."""

from __future__ import annotations

import pytest

from loadtests.bench_paths import Arithmetic, Reference, arithmetic_of, path_settings, render
from loadtests.harness.host_speed import HostReading
from loadtests.harness.loadgen import HttpResult


def result(clients: int, rps: float, p50_ms: float) -> HttpResult:
    return HttpResult(
        name=f"wrk {clients}", clients=clients, ok=100, failures=0, seconds=8.0, rps=rps, p50_ms=p50_ms, p95_ms=p50_ms, p99_ms=p50_ms
    )


@pytest.mark.parametrize(
    ("flags", "name", "value"),
    [
        ("--backend ray --dtype bfloat16", "dtype", "bfloat16"),
        ("--dtype=float16 --backend=ray", "backend", "ray"),
        ("--dtype float32 --dtype bfloat16", "dtype", "bfloat16"),  # the last one wins, as in argparse
        ("--backend ray", "dtype", "auto"),  # not given: the default, as serve would start with
        ("--dtype bfloat16", "backend", "ray"),  # serve's default backend is Ray, not local
    ],
)
def test_a_flag_is_read_in_both_spellings(flags: str, name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_CLASSIFIER_DTYPE", raising=False)
    assert path_settings(flags).value(name) == value


def test_a_path_without_dtype_runs_in_the_cpu_default_and_an_asked_one_in_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_CLASSIFIER_DTYPE", raising=False)
    monkeypatch.delenv("MCP_CLASSIFIER_FP16_WEIGHTS_MAX_TOKENS", raising=False)
    assert arithmetic_of("--backend ray --device cpu") == Arithmetic("float32", 128)
    assert arithmetic_of("--backend local --device cpu --dtype bfloat16") == Arithmetic("bfloat16", 0)


def test_fp16_weights_set_a_cpu_fp32_path_s_arithmetic_apart_and_nothing_else_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_CLASSIFIER_DTYPE", raising=False)
    off = arithmetic_of("--backend ray --device cpu --fp16-weights-max-tokens 0")
    assert off == Arithmetic("float32", 0) != arithmetic_of("--backend ray --device cpu --fp16-weights-max-tokens 96")
    assert str(off) == "float32" and str(Arithmetic("float32", 96)) == "float32, fp16 weights <= 96"
    # A bf16 model never takes them: its paths share one reference whatever the setting says.
    assert arithmetic_of("--device cpu --dtype bfloat16 --fp16-weights-max-tokens 96") == arithmetic_of("--device cpu --dtype bfloat16")


def test_each_path_s_share_and_lone_figure_are_of_its_own_dtype_s_reference() -> None:
    fp32, bf16 = Arithmetic("float32"), Arithmetic("bfloat16")
    references = {
        fp32: Reference(fp32, floor=400.0, lone_ms=8.0, ceilings={1: 100.0, 32: 320.0}, raw=[]),
        bf16: Reference(bf16, floor=600.0, lone_ms=6.0, ceilings={1: 120.0, 32: 480.0}, raw=[]),
    }
    runs = {
        "local": ("local", fp32, [result(1, 90.0, 10.0), result(32, 300.0, 100.0)]),
        "local-bf16": ("local", bf16, [result(1, 110.0, 9.0), result(32, 450.0, 70.0)]),
    }
    table = render(references, 32, runs)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| local") and "| 32 |" in line}
    assert "| 0.75 |" in rows["local"] and "| 0.94 |" in rows["local"]  # 300/400 of the floor, 300/320 of the ceiling
    assert "| 0.75 |" in rows["local-bf16"] and "| 0.94 |" in rows["local-bf16"]  # 450/600 and 450/480, not 450/400
    summary = [line for line in table.splitlines() if line.startswith("| local") and "| +3 |" in line]
    assert any("| float32 |" in line and "| 2.0 |" in line for line in summary)  # 10.0 - 8.0
    assert any("| bfloat16 |" in line and "| 3.0 |" in line for line in summary)  # 9.0 - 6.0
    assert "bfloat16: raw floor 600.0" in table and "float32: raw floor 400.0" in table


def test_a_lone_request_is_also_read_against_the_whole_in_process_classify() -> None:
    fp32 = Arithmetic("float32", 128)
    references = {fp32: Reference(fp32, floor=280.0, lone_ms=12.0, ceilings={}, raw=[], lone_classify_ms=14.5)}
    runs = {"local": ("local", fp32, [result(1, 60.0, 16.0)])}
    table = render(references, 32, runs)
    summary = next(line for line in table.splitlines() if line.startswith("| local") and "| +3 |" in line)
    assert summary.endswith("| 4.0 | +3 | 1.5 |")  # 16.0 - 12.0 against the target, 16.0 - 14.5 the serving layer's own
    assert "14.5 ms through the whole classify()" in table
    # A reference without it (older JSON, other callers) leaves the column empty rather than guessing.
    bare = {fp32: Reference(fp32, floor=280.0, lone_ms=12.0, ceilings={}, raw=[])}
    assert next(line for line in render(bare, 32, runs).splitlines() if "| +3 |" in line).endswith("| +3 | — |")


def test_every_share_is_also_given_of_the_issue_s_padded_floor_and_none_when_it_was_not_measured() -> None:
    fp32 = Arithmetic("float32", 128)
    # The strict floor (the encoder's packed batching, 500) is the one the targets' column reads; the issue's
    # own (padded sorted chunks, fastest pass, 400) is lower, so its share of the same 360 req/s is higher.
    references = {fp32: Reference(fp32, floor=500.0, lone_ms=8.0, ceilings={32: 450.0}, raw=[], issue_floor=400.0)}
    runs = {"local": ("local", fp32, [result(1, 90.0, 10.0), result(32, 360.0, 90.0)])}
    table = render(references, 32, runs)
    assert "the issue's floor 400.0 (padded sorted batches, fastest pass)" in table
    row32 = next(line for line in table.splitlines() if line.startswith("| local") and "| 32 | 360.0 |" in line)
    assert "| 0.72 | 0.90 | 0.80 |" in row32  # 360/500 of the floor, 360/400 of the issue's, 360/450 of the ceiling
    summary = next(line for line in table.splitlines() if line.startswith("| local") and "| +3 |" in line)
    assert "| 0.80 | 0.72 | 0.90 | 0.90 |" in summary  # target, share, the issue's share, the ceiling's share of the floor
    bare = {fp32: Reference(fp32, floor=500.0, lone_ms=8.0, ceilings={}, raw=[])}
    bare_row = next(line for line in render(bare, 32, runs).splitlines() if "| 32 | 360.0 |" in line)
    assert "| 0.72 | — | — |" in bare_row  # older references: left empty, not read against the strict floor


def test_the_output_ends_by_saying_what_else_ran_on_the_host_and_warns_past_the_threshold() -> None:
    fp32 = Arithmetic("float32")
    references = {fp32: Reference(fp32, floor=400.0, lone_ms=8.0, ceilings={}, raw=[])}
    levels = [result(1, 90.0, 10.0), result(32, 300.0, 100.0)]
    levels[0].other_cpu_pct, levels[1].other_cpu_pct = 2.0, 16.0
    runs = {"ray": ("ray", fp32, levels)}
    checks = [HostReading("before ray", 8.1, 1.0), HostReading("after the last path", 8.0, 0.2)]
    last = render(references, 32, runs, checks, other_before_floor=14.0).splitlines()[-1]
    assert last.startswith(
        "other processes on the host (% of one core): before the floor 14; before ray 1; after the last path 0; "
        "while serving at most 16 (ray at 32 clients). WARNING"
    )
    levels[1].other_cpu_pct = 3.0
    assert "WARNING" not in render(references, 32, runs, checks, other_before_floor=1.0).splitlines()[-1]
    assert "other processes" not in render(references, 32, {"ray": ("ray", fp32, [result(1, 90.0, 10.0)])})  # nothing measured
