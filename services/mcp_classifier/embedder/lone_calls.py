"""Whether a lone call gains from the node's idle cores: measured by each replica, once its host is quiet.

A lone call (nothing else in flight at the gateway) may run its forward on every CPU of the node
(``ClassifyRequest.lone_call_threads``), and the calls made meanwhile queue behind it. That pays where a
second thread speeds one text up: on a Xeon host one text took 10.6 ms on two threads against 15.1 on
one. On a 2-core AMD EPYC host one text took the same on either, and the queueing served about a
tenth fewer requests at 2-8 clients (docs/decisions/0010-lone-calls-borrow-idle-cores.md). So each replica times one text
both ways and reports the ratio in every ``ClassifyResponse``; the gateway offers the cores only to
replicas whose ratio reaches its ``lone_call_min_gain``.

The timing needs the other cores idle: beside another replica loading its model, two threads read
half as fast as one. So it runs in the background after the replica is ready, at a moment when the
host is quiet, and counts only if the host stayed quiet while it ran. Until then the replica reports
0 (not measured) and the gateway offers the cores as before.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable

import psutil
import torch
from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

PROBE_PAIRS = 5  # alternating one-text runs on each thread count; the best of each is kept (like the forward-overhead probe)
QUIET_CORES = 0.5  # CPU (in cores) the host may spend on anything else for a probe to run and count: an idle Ray node takes ~0.2
QUIET_SAMPLE_S = 0.2  # how long the host is watched before a probe
RETRY_S = 2.0  # between looks at the host
# Replicas of one node: one probe at a time, so no probe's wider run waits on another's cores.
PROBE_LOCK_PATH = os.path.join(tempfile.gettempdir(), "mcp-classifier-lone-call-probe.lock")


def measure_lone_call_gain(run_one_text: Callable[[], object], lone_threads: int, *, pairs: int = PROBE_PAIRS) -> float:
    """Best time of ``run_one_text`` on this thread's torch threads over its best on ``lone_threads``.

    Call it on the thread that runs the forwards (OpenMP keeps a thread team per calling thread). The
    two counts alternate, so a slow moment of the host falls on both.
    """
    own_threads = torch.get_num_threads()

    def timed(threads: int) -> float:
        torch.set_num_threads(threads)
        started = time.perf_counter()
        run_one_text()
        return time.perf_counter() - started

    try:
        timed(lone_threads)  # the wider thread team starts on its first use: not part of a call's time
        own, lone = [], []
        for _ in range(pairs):
            own.append(timed(own_threads))
            lone.append(timed(lone_threads))
    finally:
        torch.set_num_threads(own_threads)
    return min(own) / min(lone)


def host_busy_cpu_seconds() -> float:
    """CPU seconds the whole host has spent busy since boot (every core, this process included)."""
    times = psutil.cpu_times()
    return float(sum(times)) - times.idle - getattr(times, "iowait", 0.0)


class LoneCallProbe:
    """Runs ``measure`` (on the forward thread, through ``on_forward_thread``) once the host is quiet; ``gain`` is 0 until then."""

    def __init__(
        self,
        measure: Callable[[], float],
        on_forward_thread: Callable[[Callable[[], float]], float],
        *,
        host_cpu_seconds: Callable[[], float] = host_busy_cpu_seconds,
        own_cpu_seconds: Callable[[], float] = time.process_time,
        quiet_cores: float = QUIET_CORES,
        sample_s: float = QUIET_SAMPLE_S,
        retry_s: float = RETRY_S,
        lock_path: str = PROBE_LOCK_PATH,
    ) -> None:
        self.gain = 0.0
        self.attempts = 0  # probes run, counted or not
        self._measure = measure
        self._on_forward_thread = on_forward_thread
        self._host_cpu_seconds = host_cpu_seconds
        self._own_cpu_seconds = own_cpu_seconds
        self._quiet_cores = quiet_cores
        self._sample_s = sample_s
        self._retry_s = retry_s
        self._lock = FileLock(lock_path, timeout=0)
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="lone-call-probe", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._retry_s):
            try:
                if self._try_once():
                    return
            except Exception:  # a failed probe leaves lone calls as they were; the replica serves on
                log.exception("lone calls: the probe failed; the gateway offers this replica the idle cores as before")
                return

    def _busy_cores(self, seconds: float, *, others_only: bool) -> float:
        host0, own0, started = self._host_cpu_seconds(), self._own_cpu_seconds(), time.monotonic()
        if seconds:
            self._stop.wait(seconds)
        return self._busy_since(host0, own0, started, others_only=others_only)

    def _busy_since(self, host0: float, own0: float, started: float, *, others_only: bool) -> float:
        busy = self._host_cpu_seconds() - host0 - (self._own_cpu_seconds() - own0 if others_only else 0.0)
        return busy / max(time.monotonic() - started, 1e-6)

    def _try_once(self) -> bool:
        """One probe if the host (this replica included: it may be serving) is quiet; True once a reading counts."""
        if self._busy_cores(self._sample_s, others_only=False) > self._quiet_cores:
            return False
        try:
            self._lock.acquire()
        except Timeout:
            return False  # another replica of this host is probing: its cores are not idle
        try:
            host0, own0, started = self._host_cpu_seconds(), self._own_cpu_seconds(), time.monotonic()
            gain = self._on_forward_thread(self._measure)
            others = self._busy_since(host0, own0, started, others_only=True)
        finally:
            self._lock.release()
        self.attempts += 1
        if others > self._quiet_cores:
            return False  # something else ran meanwhile: the reading would understate the gain
        self.gain = gain
        log.info("lone calls: one text runs %.2fx as fast on the node's idle cores (probe %d)", gain, self.attempts)
        return True
