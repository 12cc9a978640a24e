"""The benches' other-processes line: every reading in order, the busiest level named, a warning only past the threshold.

A leftover server beside a bench deflates its floor and inflates every share (2026-11-28); the line
must say so, and stay quiet on a quiet host (a warning on every run would be ignored). The share
arithmetic is checked on constructed marks; one real busy process shows the measurement sees it.
"""

from __future__ import annotations

import subprocess
import sys

from loadtests.harness.host_load import OTHER_WARNING_PCT, LoadMark, before_floor_note, other_load_line, other_load_now


def test_other_processes_share_is_the_host_s_busy_time_less_this_process_s_own() -> None:
    start = LoadMark(wall=100.0, host=50.0, own=10.0)
    end = LoadMark(wall=104.0, host=53.0, own=12.0)  # the host busy 3 s, 2 of them ours, over 4 s
    assert end.other_pct_since(start) == 25.0
    assert LoadMark(wall=104.0, host=None, own=12.0).other_pct_since(start) is None  # no host counters: unknown, not 0


def test_a_quiet_run_lists_its_readings_without_a_warning() -> None:
    line = other_load_line(
        [("before the floor", 1.0), ("before ray", 0.4), ("after the last path", None)],
        [("ray at 1 clients", 1.2), ("ray at 32 clients", 3.0)],
    )
    assert (
        line == "other processes on the host (% of one core): before the floor 1; before ray 0; while serving at most 3 (ray at 32 clients)"
    )


def test_a_busy_reading_anywhere_is_flagged_and_the_busiest_level_named() -> None:
    busy = OTHER_WARNING_PCT + 4
    assert "WARNING: other processes took over 10% of a core" in other_load_line([("before the floor", busy)])
    line = other_load_line([("before the floor", 1.0)], [("local at 8 clients", busy), ("local at 32 clients", 2.0)])
    assert f"while serving at most {busy:.0f} (local at 8 clients)" in line and "WARNING" in line
    assert "WARNING" not in other_load_line([("before the floor", OTHER_WARNING_PCT)])
    assert other_load_line([("before the floor", None)]) == ""


def test_the_note_before_the_floor_warns_at_once_only_on_a_busy_host() -> None:
    assert before_floor_note(2.0) == "  other processes before the floor: 2% of a core"
    assert "WARNING" in before_floor_note(OTHER_WARNING_PCT + 1)
    assert before_floor_note(None) == ""


def test_a_process_spinning_beside_the_bench_is_seen() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass"])
    try:
        pct = other_load_now(1.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert pct is not None and pct > OTHER_WARNING_PCT
