"""The embeddings bench's parts that start nothing: variants, texts, ratios, cosines, tables, and its refusals.

A bench that compared a wrong pair of rows, credited a policy with a knob its server never saw, or sent passages
that one server truncated and the other did not would print a figure that means nothing; these read each part back.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pytest

from loadtests.bench_embeddings import (
    DEFAULT_QUERIES,
    INFINITY,
    CosineStats,
    Measured,
    WaitVariant,
    build_passage,
    build_passages,
    cosine_stats,
    libgomp_seen,
    load_queries,
    main,
    merge_rounds,
    model_dir,
    parse_variant,
    parse_variants,
    ratio,
    render_levels,
    render_targets,
    token_counter,
)
from loadtests.harness.infinity import INFINITY_ENV, find_infinity, infinity_env
from loadtests.harness.loadgen import HttpResult


def row(
    server: str, clients: int, rps: float, p50: float, *, texts: str = "queries", route: str = "embeddings", host: str = "quiet"
) -> Measured:
    return Measured(host, texts, server, route, clients, rps, p50, 2 * p50, 0, {"server": 150.0, "wrk": 2.0, "other": 1.0})


def test_a_variant_names_its_policy_flag_and_its_spin() -> None:
    assert parse_variant("passive") == WaitVariant("passive")
    assert parse_variant("active").serve_flags() == ["--omp-wait-policy", "active"]
    assert parse_variant("passive").serve_flags() == ["--omp-wait-policy", "passive", "--omp-spin-count", "0"]
    assert parse_variant("passive").child_env() == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
    spin = parse_variant("spin:100k")
    assert spin == WaitVariant("passive", 100_000) and spin.name == "spin 100000"
    assert spin.env() == {"GOMP_SPINCOUNT": "100000"}
    assert spin.serve_flags() == ["--omp-wait-policy", "passive", "--omp-spin-count", "100000"]
    assert spin.child_env() == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "100000"}
    assert parse_variant("spin:2M").spincount == 2_000_000 and WaitVariant("active").env() == {}
    for bad in ("spin", "spin:", "spin:ten", "spinning:10", "lazy"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_variant(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_variants("passive,spin:1000,passive")


def test_libgomp_s_own_report_is_read_back() -> None:
    printed = "OPENMP DISPLAY ENVIRONMENT BEGIN\n  OMP_WAIT_POLICY = 'PASSIVE'\n  GOMP_SPINCOUNT = '100000'\nOPENMP DISPLAY ENVIRONMENT END"
    assert libgomp_seen(printed) == "PASSIVE / 100000"
    assert libgomp_seen("no OpenMP here") == "—"


def test_a_passage_has_exactly_the_tokens_asked_for() -> None:
    words = "alpha beta gamma delta epsilon".split()

    def count(text: str) -> int:  # a tokenizer where "epsilon" is two tokens, plus two special ones
        return 2 + sum(2 if word == "epsilon" else 1 for word in text.split())

    for tokens in (3, 7, 8, 20):
        passage = build_passage(words, 2, tokens, count)
        assert count(passage) == tokens
    assert build_passage(words, 0, 7, count) == "alpha beta gamma delta and"  # "epsilon" would overshoot: a filler closes the gap
    with pytest.raises(ValueError):
        build_passage([], 0, 10, count)


def test_passages_of_router_queries_fill_the_model_s_whole_window() -> None:
    queries = load_queries(DEFAULT_QUERIES, 40)
    assert len(queries) == 40 and len(set(queries)) == 40
    folder = model_dir("builtin:minilm")
    assert folder is not None
    count = token_counter(folder)
    passages = build_passages(queries, 6, 256, count)
    assert [count(p) for p in passages] == [256] * 6  # [CLS] and [SEP] included: neither server truncates them
    assert len(set(passages)) == 6
    assert count(" ".join(queries)) > 256  # the tokenizer file's own truncation (128) is off


def test_ratios_leave_out_what_is_missing() -> None:
    assert ratio(30.0, 20.0) == 1.5
    assert ratio(None, 20.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None
    assert ratio(float("nan"), 1.0) is None


def test_cosines_pair_each_text_and_report_norms_apart() -> None:
    rng = np.random.default_rng(0)
    ours = rng.normal(size=(5, 8))
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)
    same = cosine_stats(ours, ours * 1.01)  # the same directions, norms 1% off on one side
    assert same.texts == 5 and same.min == pytest.approx(1.0) and same.mean == pytest.approx(1.0)
    assert same.ours_norm_error == pytest.approx(0.0, abs=1e-12) and same.theirs_norm_error == pytest.approx(0.01)
    flipped = ours.copy()
    flipped[2] = -flipped[2]
    mixed = cosine_stats(ours, flipped)
    assert mixed.min == pytest.approx(-1.0) and mixed.mean == pytest.approx(3 / 5)
    with pytest.raises(ValueError):
        cosine_stats(ours, ours[:4])


def test_rounds_merge_by_median_and_sum_their_errors() -> None:
    rounds = [row("ours passive", 32, rps, 10.0) for rps in (100.0, 300.0, 200.0)]
    rounds[1].errors = 2
    (merged,) = merge_rounds(rounds)
    assert merged.rps == 200.0 and merged.p50_ms == 10.0 and merged.errors == 2


def test_a_level_that_answered_nothing_shows_no_latency() -> None:
    silent = HttpResult("wrk 8 clients", 8, ok=0, failures=0, seconds=2.0, rps=0.0, p50_ms=0.0, p95_ms=0.0, p99_ms=0.0)
    level = Measured.of("busy", "passages", "ours active", "embeddings", silent)
    assert level.rps == 0.0 and level.p50_ms != level.p50_ms  # NaN: wrk's 0 ms would read as the fastest answer
    peer = row(INFINITY, 8, 4.0, 1700.0, texts="passages", host="busy")
    assert "| busy | passages | 8 | ours active | embeddings | 0.0 | — | — | 0 | 0.00 | — |" in render_levels([peer, level])
    (merged,) = merge_rounds([level, row("ours active", 8, 2.0, 900.0, texts="passages", host="busy")])
    assert merged.rps == 1.0 and merged.p50_ms == 900.0  # the round that answered gives the latency


def test_each_row_is_read_against_infinity_at_the_same_texts_and_level() -> None:
    rows = [
        row(INFINITY, 1, 40.0, 24.0),
        row(INFINITY, 32, 125.0, 250.0),
        row("ours passive", 1, 55.0, 18.0),
        row("ours passive", 32, 203.0, 150.0),
        row(INFINITY, 32, 10.0, 3000.0, texts="passages"),
        row("ours passive", 32, 20.0, 1500.0, texts="passages"),
    ]
    table = render_levels(rows).splitlines()
    assert "| quiet | queries | 32 | ours passive | embeddings | 203.0 | 150.0 | 300.0 | 0 | 1.62 | 0.60 | 150 / 2 / 1 |" in table
    assert "| quiet | passages | 32 | ours passive | embeddings | 20.0 | 1500.0 | 3000.0 | 0 | 2.00 | 0.50 | 150 / 2 / 1 |" in table
    assert "| quiet | queries | 1 | infinity | embeddings | 40.0 | 24.0 | 48.0 | 0 | — | — | 150 / 2 / 1 |" in table


def test_the_targets_need_throughput_latency_and_agreeing_vectors() -> None:
    rows = [
        row(INFINITY, 1, 40.0, 24.0),
        row(INFINITY, 32, 125.0, 250.0),
        row("ours passive", 1, 55.0, 18.0),  # 0.75x Infinity's lone p50: within 0.8
        row("ours passive", 32, 203.0, 150.0),  # 1.62x its req/s: past 1.5
        row("ours active", 1, 100.0, 8.3),
        row("ours active", 32, 150.0, 200.0),  # 1.2x: short of 1.5
        row("ours passive", 1, 60.0, 17.0, route="classify"),
        row("ours passive", 32, 203.0, 150.0, route="classify"),
    ]
    cosines = {(name, "queries"): CosineStats(24, 0.99999, 0.999995, 1e-7, 1e-7) for name in ("ours passive", "ours active")}
    table = render_targets(rows, cosines, [1, 8, 32]).splitlines()
    assert table[0].startswith("| host | server | route | req/s at 32 vs Infinity (>= 1.5) | p50 at 1 vs Infinity (<= 0.8)")
    assert "| quiet | ours passive | embeddings | 1.62x | 0.75x | 0.999990 | PASS |" in table
    assert "| quiet | ours active | embeddings | 1.20x | 0.35x | 0.999990 | MISS |" in table
    assert "| quiet | ours passive | classify | 1.62x | 0.71x | — | PASS |" in table  # no vectors on the classify path
    silent_lone = [r for r in rows if (r.server, r.clients) != ("ours active", 1)]
    assert "| quiet | ours active | embeddings | 1.20x | — | 0.999990 | MISS |" in render_targets(silent_lone, cosines, [1, 32])
    low = {(name, "queries"): CosineStats(24, 0.9990, 0.9995, 1e-7, 1e-7) for name in ("ours passive", "ours active")}
    assert "| quiet | ours passive | embeddings | 1.62x | 0.75x | 0.999000 | MISS |" in render_targets(rows, low, [1, 32])


def test_without_infinity_the_bench_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(INFINITY_ENV, raising=False)
    assert main(["--quick"]) == 2
    err = capsys.readouterr().err
    assert "pip install torch==2.13.0 'infinity-emb[torch,server]'" in err and "--infinity" in err
    monkeypatch.setenv(INFINITY_ENV, "/nowhere/infinity_emb")
    assert main(["--quick"]) == 2
    assert "/nowhere/infinity_emb: not an executable here" in capsys.readouterr().err


def test_a_run_with_nothing_to_time_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--no-infinity", "--rounds", "0"]) == 2
    assert "--rounds" in capsys.readouterr().err
    assert main(["--no-infinity", "--hosts", "noisy"]) == 2
    assert "--hosts" in capsys.readouterr().err


def test_infinity_is_found_by_path_and_runs_with_libgomp_s_own_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "infinity_emb"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.delenv(INFINITY_ENV, raising=False)
    assert find_infinity(None) is None and find_infinity(str(tmp_path / "absent")) is None
    assert find_infinity(str(binary)) == binary
    monkeypatch.setenv(INFINITY_ENV, str(binary))
    assert find_infinity(None) == binary
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    env = infinity_env({"OMP_DISPLAY_ENV": "VERBOSE"})
    assert "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env
    assert env["DO_NOT_TRACK"] == "1" and env["OMP_DISPLAY_ENV"] == "VERBOSE" and env["PATH"] == os.environ["PATH"]
