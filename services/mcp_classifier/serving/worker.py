"""One gateway worker of `serve --workers N`: the whole gateway on the supervisor's port (and each classifier's own
port), in a spawned process.

The supervisor hands it finished settings (the shared Redis URL, the embedder address) and a queue on
which it says when it can classify; it prints nothing of its own, so scripts read one "ready on" line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing.queues import Queue
from typing import Any

from ..settings import Settings

PARENT_CHECK_S = 1.0  # how often a worker checks that its supervisor still lives
LISTEN_BACKLOG = 2048  # uvicorn's default


class WorkerIdentity:
    """/health's ``worker``: which of the N processes answered (they share one port)."""

    def __init__(self, index: int, workers: int) -> None:
        self._index = index
        self._workers = workers

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def health(self) -> dict[str, Any]:
        return {"worker": {"pid": os.getpid(), "index": self._index, "workers": self._workers}}


def _stop_when_orphaned() -> None:
    """A supervisor killed outright (SIGKILL) cannot stop its workers: each stops itself (it drains) once orphaned."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run_worker(settings: Settings, ready: Queue[tuple[int, int, float | None]], index: int, workers: int) -> None:
    """The spawned process's target: serve until SIGTERM; the exit code says how it ended (0 clean, 1 failed start).

    Each worker listens on its own SO_REUSEPORT socket on the serving port: the kernel spreads connections evenly over
    the workers. One inherited socket would not: a waking asyncio server accepts a whole burst of connections at
    once, so a client opening its pool (a router's keep-alive connections) could land on one worker only."""
    from ..cache.runtime import RedisRuntime
    from ..telemetry import GatewayMetrics, configure_logging
    from .gateway import bind, bind_classify_ports, run_gateway

    serving = settings.serving
    sock = bind(serving.host, serving.port, reuse_port=True)
    classify_sockets = bind_classify_ports(serving, reuse_port=True)  # the supervisor picked every port: none is 0 here
    for listening in (sock, *classify_sockets.values()):
        listening.listen(LISTEN_BACKLOG)  # connections wait here while the app is built
    configure_logging(serving.log_level, serving.log_format, with_pid=True, progress_bars=serving.verbose)
    _stop_when_orphaned()
    metrics = GatewayMetrics()
    # A client of the supervisor's Redis: it never starts one itself.
    redis = RedisRuntime(settings.cache, metrics.registry, rate_limited=settings.edge.rate_limit_requests > 0)
    code = run_gateway(
        settings,
        metrics,
        redis,
        sock,
        announce=False,
        on_ready=lambda start_seconds: ready.put((index, os.getpid(), start_seconds)),
        services=[WorkerIdentity(index, workers)],
        classify_sockets=classify_sockets,
    )
    sys.exit(code)
