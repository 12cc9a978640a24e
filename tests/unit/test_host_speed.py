"""The bench's host-speed line: every check in order, and a warning only when the host's speed moved.

A reader compares paths measured minutes apart; the line must say when those minutes ran on a
different host speed, and stay quiet when they did not (a warning on every run would be ignored).
"""

from __future__ import annotations

from loadtests.harness.host_speed import DRIFT_WARNING, HostReading, host_speed_line


def test_every_check_is_listed_in_order_beside_the_reference() -> None:
    readings = [HostReading("before ray", 7.3), HostReading("before local", 7.0), HostReading("after the last path", 7.2)]
    line = host_speed_line(7.1, readings)
    assert "reference 7.1; before ray 7.3; before local 7.0; after the last path 7.2" in line
    assert "slowest 1.04x the fastest" in line  # 7.3 / 7.0
    assert "WARNING" not in line


def test_a_host_that_slowed_past_the_threshold_is_flagged() -> None:
    slowed = 7.1 * DRIFT_WARNING * 1.01
    line = host_speed_line(7.1, [HostReading("before ray", 7.2), HostReading("before local", slowed)])
    assert "WARNING: the host's speed moved by more than 15%" in line
    # The reference itself counts: a run whose every check is slow against its floor's minute is flagged too.
    assert "WARNING" in host_speed_line(7.1, [HostReading("before ray", slowed)])
    assert "WARNING" not in host_speed_line(7.1, [HostReading("before ray", 7.1 * DRIFT_WARNING * 0.99)])


def test_no_checks_no_line() -> None:
    assert host_speed_line(7.1, []) == ""
