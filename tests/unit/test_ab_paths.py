"""The A/B bench's own rules: variant specs, alternating order, paired ratios and the table (no servers)."""

from __future__ import annotations

import os

import pytest

from loadtests.ab_paths import Level, Variant, environment, main, paired, render, round_order
from loadtests.bench_paths import Arithmetic, Reference, arithmetic_of
from loadtests.harness.host_speed import HostReading
from loadtests.harness.loadgen import HttpResult


def result(clients: int, rps: float, p50_ms: float, failures: int = 0) -> HttpResult:
    return HttpResult(
        name=f"wrk {clients}", clients=clients, ok=100, failures=failures, seconds=8.0, rps=rps, p50_ms=p50_ms, p95_ms=p50_ms, p99_ms=p50_ms
    )


def test_leading_assignments_are_the_server_s_environment_and_the_rest_its_flags() -> None:
    variant = Variant.parse("spin", "GOMP_SPINCOUNT=3000000 MCP_CLASSIFIER_DTYPE=bfloat16 --backend ray --batch-window-ms 2")
    assert variant.env == {"GOMP_SPINCOUNT": "3000000", "MCP_CLASSIFIER_DTYPE": "bfloat16"}
    assert variant.flags == "--backend ray --batch-window-ms 2"


def test_an_assignment_after_the_first_flag_stays_a_flag_value() -> None:
    variant = Variant.parse("odd", "--backend local --categories-file A=B.yaml")
    assert variant.env == {}
    assert variant.flags == "--backend local --categories-file A=B.yaml"


def test_a_variant_s_environment_sets_its_arithmetic_and_is_undone_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_CLASSIFIER_FP16_WEIGHTS_MAX_TOKENS", raising=False)
    variant = Variant.parse("fp32", "MCP_CLASSIFIER_FP16_WEIGHTS_MAX_TOKENS=0 --backend local --device cpu")
    with environment(variant.env):
        assert arithmetic_of(variant.flags) == Arithmetic("float32", 0)
    assert "MCP_CLASSIFIER_FP16_WEIGHTS_MAX_TOKENS" not in os.environ
    assert arithmetic_of(variant.flags) == Arithmetic("float32", 128)


def test_rounds_alternate_which_variant_starts_first() -> None:
    names = ["a", "b", "c"]
    assert [round_order(names, r) for r in range(3)] == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]


def test_paired_ratios_are_taken_round_by_round() -> None:
    # a whole-machine slowdown in round 2 moves both sides alike: the ratio stays 1.1
    ratio, higher = paired([110.0, 55.0, 121.0], [100.0, 50.0, 110.0])
    assert ratio == pytest.approx(1.1)
    assert higher == 3
    ratio, higher = paired([90.0, 120.0], [100.0, 100.0])
    assert ratio == pytest.approx(1.05)
    assert higher == 1


def test_the_table_reads_every_variant_against_the_first_and_its_own_floor() -> None:
    fp16, fp32 = Arithmetic("float32", 128), Arithmetic("float32", 0)
    references = {fp16: Reference(fp16, 280.0, 12.0, {}, []), fp32: Reference(fp32, 270.0, 16.0, {}, [])}
    base, other = Level(), Level()
    for rps, p50 in [(100.0, 20.0), (120.0, 24.0)]:
        base.add(result(1, rps / 4, p50))
    for rps, p50 in [(110.0, 18.0), (126.0, 26.0)]:
        other.add(result(1, rps / 4, p50, failures=1))
    variants = [Variant("ray", {}, "--backend ray"), Variant("ray-fp32", {"MCP_CLASSIFIER_FP16_WEIGHTS_MAX_TOKENS": "0"}, "--backend ray")]
    table = render(variants, {"ray": fp16, "ray-fp32": fp32}, references, {"ray": {1: base}, "ray-fp32": {1: other}})
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ray")}
    assert "req/s vs ray" in table
    # ray: median 22.0 ms against its raw lone 12.0 -> +10.0; ray-fp32: median 22.0 against 16.0 -> +6.0
    assert "| 22.0 | 1 | 10.0 | 0 |" in rows["ray"]
    assert "1.075 (2/2)" in rows["ray-fp32"]  # req/s ratios 1.10 and 1.05
    assert "| 6.0 | 2 |" in rows["ray-fp32"]


def test_the_table_also_reads_each_variant_against_the_issue_s_padded_floor() -> None:
    fp16 = Arithmetic("float32", 128)
    references = {fp16: Reference(fp16, 400.0, 12.0, {}, [], issue_floor=320.0)}
    base, other = Level(), Level()
    base.add(result(32, 288.0, 90.0))
    other.add(result(32, 256.0, 95.0))
    variants = [Variant("a", {}, "--backend local"), Variant("b", {}, "--backend local")]
    table = render(variants, {"a": fp16, "b": fp16}, references, {"a": {32: base}, "b": {32: other}})
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith(("| a ", "| b "))}
    assert "| 288.0 | 0.72 | 0.90 | 1 |" in rows["a"]  # 288/400 of the floor, 288/320 of the issue's
    assert "| 256.0 | 0.64 | 0.80 | 0.889 (0/1) |" in rows["b"]


def test_one_variant_or_a_repeated_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--path", "a=--backend local"])
    with pytest.raises(SystemExit):
        main(["--path", "a=--backend local", "--path", "a=--backend ray"])
    assert "two or more --path" in capsys.readouterr().err


@pytest.mark.parametrize("count", ["0", "10000"])
def test_a_text_count_the_bench_does_not_have_is_refused(count: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--path", "a=--backend local", "--path", "b=--backend local", "--texts", count])
    assert "--texts must be between 1 and" in capsys.readouterr().err


def test_the_table_ends_by_saying_what_else_ran_on_the_host_and_warns_past_the_threshold() -> None:
    fp16 = Arithmetic("float32", 128)
    references = {fp16: Reference(fp16, 400.0, 12.0, {}, [])}
    quiet, crowded = result(32, 288.0, 90.0), result(32, 250.0, 99.0)
    quiet.other_cpu_pct, crowded.other_cpu_pct = 1.0, 15.0  # an idle leftover Ray node takes about 15% of a core
    base, other = Level(), Level()
    base.add(quiet)
    other.add(crowded)
    variants = [Variant("a", {}, "--backend local"), Variant("b", {}, "--backend local")]
    checks = [HostReading("round 1/1: a", 7.0, 0.5), HostReading("round 1/1: b", 7.1, 2.0)]
    table = render(variants, {"a": fp16, "b": fp16}, references, {"a": {32: base}, "b": {32: other}}, checks, other_before_floor=1.0)
    last = table.splitlines()[-1]
    assert last.startswith("other processes on the host (% of one core): before the floor 1; round 1/1: a 0; round 1/1: b 2;")
    assert "while serving at most 15 (b at 32 clients, round 1)" in last and "WARNING" in last
    base.other_cpu_pct[0] = other.other_cpu_pct[0] = 1.0
    quiet_table = render(variants, {"a": fp16, "b": fp16}, references, {"a": {32: base}, "b": {32: other}}, checks, 1.0)
    assert "WARNING" not in quiet_table.splitlines()[-1]
