"""Real gateway processes for the tests: the local backend unless told otherwise, logs in the test's folder.

How long a test waits for a server to become ready comes from one place, `StartBudget`: at least
`MIN_READY_WAIT_S` times the host's load (runnable processes per core over the last minute, when over one),
and never less than `SLOWEST_START_FACTOR` times the slowest start this test session has seen. A busy host
slows every start alike, so the wait grows with what the host shows, instead of a fixed constant a loaded
CI machine outruns (the first start of a session has no measured start to go by, and an embedded Ray node
took over 180 s beside four other busy processes on 2 cores). The wait ends as soon as the server is
ready: a long budget costs a quiet host nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mcp_classifier.loadtest.stack import GatewayProcess, start_gateway

ServerProcess = GatewayProcess
MIN_READY_WAIT_S = 180.0
SLOWEST_START_FACTOR = 4.0


class StartBudget:
    """The readiness wait for the next start, scaled from the starts measured so far in this session."""

    def __init__(self, minimum_s: float = MIN_READY_WAIT_S, factor: float = SLOWEST_START_FACTOR) -> None:
        self.minimum_s = minimum_s
        self.factor = factor
        self.slowest_s = 0.0

    def wait_s(self) -> float:
        return max(self.minimum_s * host_load(), self.factor * self.slowest_s)

    def record(self, seconds: float) -> None:
        self.slowest_s = max(self.slowest_s, seconds)


def host_load() -> float:
    """Runnable processes per core this process may use, averaged over the last minute; 1 on a host with room."""
    return max(1.0, os.getloadavg()[0] / len(os.sched_getaffinity(0)))


START_BUDGET = StartBudget()


def start_server(tmp_dir: Path, *extra_args: str, env: dict[str, str] | None = None, wait_ready: bool = True) -> ServerProcess:
    """`mcp-classifier serve --port 0 --backend local ARGS` (a later --backend wins), ready when this returns."""
    log_path = tmp_dir / f"server-{time.monotonic_ns()}.log"
    started = time.monotonic()
    server = start_gateway(log_path, "--backend", "local", *extra_args, env=env, wait_ready=wait_ready, timeout_s=START_BUDGET.wait_s())
    if wait_ready:
        START_BUDGET.record(time.monotonic() - started)
    return server
