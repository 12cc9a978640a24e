"""`serve --workers N`: N gateway processes on one listening socket, under one supervising process.

The shape is gunicorn's with reuse_port: this process reserves the port (and each classifier's own port),
each spawned worker listens on it with SO_REUSEPORT and the kernel spreads new connections over the workers'
sockets; a worker that dies is replaced. Hand-written rather than uvicorn's own supervisor
(uvicorn.supervisors.Multiprocess) because that one runs a plain uvicorn.Server in each child, with no
hook for the gateway's draining server, and calls a worker ready when uvicorn has started, where the
gateway is ready only once its backend can classify.

What must be single stays here (shared.py): the embedded Redis, the embedded Ray node, the metrics
directory. This process prints the one "starting on" and the one "ready on" line; on SIGTERM it passes
the signal to every worker (each drains as a lone gateway does) and exits 0 once they all have.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import time
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue

from ..settings import Settings
from .gateway import bind, say_classify_ports, say_ready, say_starting, url_of
from .shared import SharedParts
from .worker import run_worker

log = logging.getLogger(__name__)

MONITOR_PERIOD_S = 0.5  # how often the supervisor looks for a dead worker
STOP_GRACE_S = 10.0  # beyond a worker's drain and shutdown time, before it is killed


class Supervisor:
    def __init__(self, settings: Settings, worker_settings: Settings, workers: int, url: str) -> None:
        self.settings = settings
        self.worker_settings = worker_settings
        self.workers = workers
        self.url = url
        self.context = multiprocessing.get_context("spawn")  # a fresh interpreter: no fork of a process with threads
        self.ready: Queue[tuple[int, int, float | None]] = self.context.Queue()
        self.processes: list[SpawnProcess] = []
        self.stop_signal: int | None = None

    def spawn(self, index: int) -> SpawnProcess:
        process = self.context.Process(
            target=run_worker,
            args=(self.worker_settings, self.ready, index, self.workers),
            name=f"mcp-classifier-worker-{index}",
        )
        process.start()
        return process

    def on_signal(self, sig: int, _frame: object) -> None:
        self.stop_signal = sig

    def wait_until_ready(self, started: float) -> bool:
        """True once every worker can classify; False if one exits first or a stop signal arrives."""
        ready: set[int] = set()
        while len(ready) < self.workers:
            if self.stop_signal is not None:
                return False
            try:
                index, _pid, _seconds = self.ready.get(timeout=MONITOR_PERIOD_S)
                ready.add(index)
            except queue.Empty:
                pass
            failed = [p for p in self.processes if not p.is_alive()]
            if failed:
                log.error("gateway worker %s exited with %s before it was ready: stopping", failed[0].name, failed[0].exitcode)
                return False
        say_ready(self.settings.serving, self.settings.model, self.url, time.monotonic() - started, self.workers)
        return True

    def keep_alive(self, metrics_dir: str) -> None:
        """Until a stop signal: replace any worker that died (its live gauges leave the metrics first)."""
        from prometheus_client import multiprocess

        while self.stop_signal is None:
            time.sleep(MONITOR_PERIOD_S)
            for index, process in enumerate(self.processes):
                if process.is_alive() or self.stop_signal is not None:
                    continue
                log.warning("gateway worker %s (pid %s) exited with %s: starting another", process.name, process.pid, process.exitcode)
                if process.pid is not None:
                    multiprocess.mark_process_dead(process.pid, metrics_dir)
                self.processes[index] = self.spawn(index)
            self._log_restarted()

    def _log_restarted(self) -> None:
        while True:
            try:
                index, pid, _ = self.ready.get_nowait()
            except queue.Empty:
                return
            log.info("gateway worker %d (pid %d) is ready", index, pid)

    def stop(self) -> bool:
        """Pass the stop signal to every worker, wait for their drain; True when each exited cleanly."""
        sig = self.stop_signal or signal.SIGTERM
        for process in self.processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, sig)
        serving = self.settings.serving
        deadline = time.monotonic() + serving.drain_delay_s + serving.shutdown_timeout_s + STOP_GRACE_S
        clean = True
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("gateway worker %s (pid %s) did not stop in time: killing it", process.name, process.pid)
                process.kill()
                process.join()
            clean = clean and process.exitcode == 0
        return clean


def serve_workers(settings: Settings, workers: int) -> int:
    """Run ``workers`` gateway processes on the serving host:port until SIGTERM/SIGINT; the exit code of `serve`."""
    started = time.monotonic()
    reservation = bind(settings.serving.host, settings.serving.port, reuse_port=True)  # never listening: it takes no connections
    url = url_of(reservation)
    with reservation, SharedParts(settings, workers) as shared:
        worker_settings = shared.worker_settings.with_values(port=reservation.getsockname()[1])
        supervisor = Supervisor(settings, worker_settings, workers, url)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, supervisor.on_signal)
        supervisor.processes = [supervisor.spawn(index) for index in range(workers)]
        say_starting(settings.serving, settings.model, url)
        say_classify_ports(shared.classify_reservations)
        log.info("supervising %d gateway workers (pids %s)", workers, ", ".join(str(p.pid) for p in supervisor.processes))
        if supervisor.wait_until_ready(started):
            supervisor.keep_alive(shared.metrics_dir)
            return 0 if supervisor.stop() else 1
        stopped_cleanly = supervisor.stop()
        return 0 if supervisor.stop_signal is not None and stopped_cleanly else 1
