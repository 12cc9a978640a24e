"""The lone-call probe: what it measures (real torch thread counts) and when its reading counts (a fake host clock).

The host's CPU is faked here because the rule is arithmetic on two clocks; a real replica runs the probe in
tests/e2e/test_ray_stack.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch

from mcp_classifier.embedder.lone_calls import LoneCallProbe, measure_lone_call_gain


def test_the_gain_is_how_much_sooner_one_text_runs_on_more_threads_and_the_threads_are_restored() -> None:
    before = torch.get_num_threads()
    seen: list[int] = []

    def scales_with_threads() -> None:
        seen.append(torch.get_num_threads())
        time.sleep(0.02 / torch.get_num_threads())

    gain = measure_lone_call_gain(scales_with_threads, 2 * before)
    assert 1.6 <= gain <= 2.4, gain
    assert set(seen) == {before, 2 * before}  # both counts, alternating
    assert torch.get_num_threads() == before

    assert 0.8 <= measure_lone_call_gain(lambda: time.sleep(0.005), 2 * before) <= 1.25  # no faster on more threads

    def fails() -> None:
        raise RuntimeError("forward failed")

    with pytest.raises(RuntimeError):
        measure_lone_call_gain(fails, 2 * before)
    assert torch.get_num_threads() == before


class FakeHost:
    """CPU clocks that advance at set rates (in cores) with real time."""

    def __init__(self, others_cores: float, own_cores: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._host = self._own = 0.0
        self._last = time.monotonic()
        self._others_cores = others_cores
        self._own_cores = own_cores

    @property
    def others_cores(self) -> float:
        return self._others_cores

    @others_cores.setter
    def others_cores(self, cores: float) -> None:
        self._advance()  # the time so far ran at the old rate
        self._others_cores = cores

    @property
    def own_cores(self) -> float:
        return self._own_cores

    @own_cores.setter
    def own_cores(self, cores: float) -> None:
        self._advance()
        self._own_cores = cores

    def _advance(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._host += (self._others_cores + self._own_cores) * (now - self._last)
            self._own += self._own_cores * (now - self._last)
            self._last = now

    def host_cpu_seconds(self) -> float:
        self._advance()
        return self._host

    def own_cpu_seconds(self) -> float:
        self._advance()
        return self._own


def probe_on(host: FakeHost, measure: object, lock_path: Path, runs_on: list[str]) -> LoneCallProbe:
    def on_forward_thread(fn: object) -> float:
        runs_on.append(threading.current_thread().name)
        return fn()  # type: ignore[operator, no-any-return]

    return LoneCallProbe(
        measure,  # type: ignore[arg-type]
        on_forward_thread,
        host_cpu_seconds=host.host_cpu_seconds,
        own_cpu_seconds=host.own_cpu_seconds,
        quiet_cores=0.5,
        sample_s=0.02,
        retry_s=0.01,
        lock_path=str(lock_path),
    )


def wait_for(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_probe_waits_for_a_quiet_host_then_reports_its_reading(tmp_path: Path) -> None:
    host = FakeHost(others_cores=1.0)  # another process keeps a core busy (a replica loading its model)
    runs_on: list[str] = []
    probe = probe_on(host, lambda: 1.7, tmp_path / "probe.lock", runs_on)
    probe.start()
    try:
        time.sleep(0.3)
        assert probe.gain == 0.0 and probe.attempts == 0 and runs_on == []  # not measured: the gateway borrows as before
        host.others_cores = 0.2  # an idle Ray node's own processes
        wait_for(lambda: probe.gain == 1.7)
        assert runs_on == ["lone-call-probe"] and probe.attempts == 1
    finally:
        probe.stop()


def test_the_probe_waits_while_its_own_replica_serves(tmp_path: Path) -> None:
    host = FakeHost(others_cores=0.0, own_cores=1.0)  # this replica's forwards keep its core busy
    probe = probe_on(host, lambda: 1.7, tmp_path / "probe.lock", [])
    probe.start()
    try:
        time.sleep(0.3)
        assert probe.attempts == 0
        host.own_cores = 0.0
        wait_for(lambda: probe.gain == 1.7)
    finally:
        probe.stop()


def test_a_reading_taken_while_something_else_ran_is_dropped_and_taken_again(tmp_path: Path) -> None:
    host = FakeHost(others_cores=0.1)
    calls = 0

    def measure() -> float:
        nonlocal calls
        calls += 1
        if calls == 1:
            host.others_cores = 1.5  # something woke up during the first reading: its 0.5 understates the gain
            time.sleep(0.05)
            host.others_cores = 0.1
            return 0.5
        time.sleep(0.05)
        return 1.4

    probe = probe_on(host, measure, tmp_path / "probe.lock", [])
    probe.start()
    try:
        wait_for(lambda: probe.gain != 0.0)
        assert probe.gain == 1.4 and probe.attempts == 2
    finally:
        probe.stop()


def test_replicas_of_one_host_probe_one_at_a_time(tmp_path: Path) -> None:
    lock_path = tmp_path / "probe.lock"
    running = 0
    most_at_once = 0
    counter = threading.Lock()

    def measure() -> float:
        nonlocal running, most_at_once
        with counter:
            running += 1
            most_at_once = max(most_at_once, running)
        time.sleep(0.1)
        with counter:
            running -= 1
        return 1.5

    probes = [probe_on(FakeHost(others_cores=0.0), measure, lock_path, []) for _ in range(3)]
    for probe in probes:
        probe.start()
    try:
        wait_for(lambda: all(probe.gain == 1.5 for probe in probes))
        assert most_at_once == 1
    finally:
        for probe in probes:
            probe.stop()


def test_a_failed_probe_leaves_the_gain_unmeasured(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def fails() -> float:
        raise RuntimeError("forward failed")

    probe = probe_on(FakeHost(others_cores=0.0), fails, tmp_path / "probe.lock", [])
    with caplog.at_level("ERROR"):
        probe.start()
        wait_for(lambda: "probe failed" in caplog.text)
    assert probe.gain == 0.0
