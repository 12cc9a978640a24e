"""The OpenMP wait-policy bench on tiny inputs: each row's child loaded torch under the policy it names.

A row whose child silently ran under the other policy (an environment that did not reach it) would compare a
policy with itself; the table's "seen" column is what the child read, so the test reads it back.
"""

from __future__ import annotations

import pytest

from loadtests.bench_omp_wait import main


def test_each_row_runs_under_the_policy_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    # Idle rows only: an active row beside busy cores spins out its start probes too (over a minute on a busy host);
    # the busy neighbours are tests/unit/test_bench_omp_wait.py's.
    assert main(["--texts", "3", "--rounds", "1", "--busy", "0"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert [(host, policy, seen) for host, policy, seen, *_ in cells] == [
        ("idle", "active", "ACTIVE"),
        ("idle", "passive", "PASSIVE"),
    ]
    for *_, forward_ms, classify_ms, batch_rate, _ratio in cells:
        assert float(forward_ms) > 0 and float(classify_ms) > 0 and float(batch_rate) > 0
