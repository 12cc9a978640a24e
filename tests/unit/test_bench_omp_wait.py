"""The wait-policy bench's parts that need no model: the busy neighbours, the table, the refusal of empty runs."""

from __future__ import annotations

import psutil
import pytest

from loadtests.bench_omp_wait import SPIN, Row, busy_cores, main, render


def spinners() -> list[psutil.Process]:
    return [p for p in psutil.Process().children() if p.is_running() and SPIN in " ".join(p.cmdline())]


def test_the_busy_neighbours_spin_while_the_rows_run_and_are_gone_after() -> None:
    with busy_cores(2):
        running = spinners()
        assert len(running) == 2
        # Alive: a spinner still starting Python may be reading its modules (disk sleep) on a busy host.
        assert all(p.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD, psutil.STATUS_STOPPED) for p in running)
    assert spinners() == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in running)


def test_each_policy_is_compared_with_the_active_one_on_the_same_host() -> None:
    rows = [
        Row("idle", "active", "ACTIVE", 9.0, 10.0, 300.0),
        Row("idle", "passive", "PASSIVE", 11.0, 12.5, 280.0),
        Row("beside 2 busy", "active", "ACTIVE", 400.0, 500.0, 30.0),
        Row("beside 2 busy", "passive", "PASSIVE", 15.0, 25.0, 130.0),
    ]
    lines = render(rows).splitlines()
    assert lines[2].endswith("| 1.00x |") and lines[3].endswith("| 1.25x |")
    assert lines[5].endswith("| 0.05x |")
    assert "| beside 2 busy | passive | PASSIVE | 15.00 | 25.00 | 130.0 |" in lines[5]


def test_a_run_with_nothing_to_time_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--texts", "0"]) == 2
    assert "--texts" in capsys.readouterr().err
