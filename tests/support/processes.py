"""Real gateway processes for the tests: the local backend unless told otherwise, logs in the test's folder.

How long a test waits for a server to become ready comes from one place, `StartBudget`: at least
`MIN_READY_WAIT_S` times the host's load (runnable processes per core over the last minute, when over one),
and never less than `SLOWEST_START_FACTOR` times the slowest start this test session has seen, each times the
start's cost in gateway starts (an embedded Ray node starts Ray's own processes and a Python interpreter per
replica besides the gateway: `EMBEDDED_RAY_START_COST`). A busy host slows every start alike, so the wait grows
with what the host shows, instead of a fixed constant a loaded CI machine outruns (the first start of a session
has no measured start to go by, and an embedded Ray node's replicas took over 180 s to begin loading beside two
busy processes on 2 cores). The wait ends as soon as the server is ready: a long budget costs a quiet host nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mcp_classifier.loadtest.stack import GatewayProcess, start_gateway

ServerProcess = GatewayProcess
MIN_READY_WAIT_S = 180.0
SLOWEST_START_FACTOR = 4.0
# A quiet 2-core host starts a gateway on the local backend in about 11 s and an embedded Ray node (gateway,
# GCS, raylet, agents, Serve's controller and proxy, the replicas) in about 40 s.
EMBEDDED_RAY_START_COST = 4.0
# No wait runs past this: the embedded-Ray modules' pytest timeout (RAY_MODULE_TIMEOUT_S) leaves room after it,
# so a start that never ends fails with its log's tail rather than pytest-timeout's stack dump.
MAX_READY_WAIT_S = 1000.0
RAY_MODULE_TIMEOUT_S = 1200


class StartBudget:
    """The readiness wait for the next start, scaled from the starts measured so far in this session."""

    def __init__(self, minimum_s: float = MIN_READY_WAIT_S, factor: float = SLOWEST_START_FACTOR) -> None:
        self.minimum_s = minimum_s
        self.factor = factor
        self.slowest_s = 0.0

    def wait_s(self, cost: float = 1.0) -> float:
        """For a start costing ``cost`` gateway starts."""
        return min(MAX_READY_WAIT_S, cost * max(self.minimum_s * host_load(), self.factor * self.slowest_s))

    def record(self, seconds: float, cost: float = 1.0) -> None:
        self.slowest_s = max(self.slowest_s, seconds / cost)


def host_load() -> float:
    """Runnable processes per core this process may use, averaged over the last minute; 1 on a host with room."""
    return max(1.0, os.getloadavg()[0] / len(os.sched_getaffinity(0)))


START_BUDGET = StartBudget()


def start_cost(serve_args: tuple[str, ...]) -> float:
    """What a `serve ARGS` start costs in gateway starts: the last --backend given decides, as in the CLI."""
    backends = [serve_args[i + 1] for i, arg in enumerate(serve_args[:-1]) if arg == "--backend"]
    return EMBEDDED_RAY_START_COST if backends and backends[-1] == "ray" else 1.0


def start_server(tmp_dir: Path, *extra_args: str, env: dict[str, str] | None = None, wait_ready: bool = True) -> ServerProcess:
    """`mcp-classifier serve --port 0 --backend local ARGS` (a later --backend wins), ready when this returns."""
    cost = start_cost(extra_args)
    log_path = tmp_dir / f"server-{time.monotonic_ns()}.log"
    started = time.monotonic()
    server = start_gateway(log_path, "--backend", "local", *extra_args, env=env, wait_ready=wait_ready, timeout_s=START_BUDGET.wait_s(cost))
    if wait_ready:
        START_BUDGET.record(time.monotonic() - started, cost)
    return server
