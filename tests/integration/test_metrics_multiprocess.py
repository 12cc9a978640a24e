"""With several gateway workers, /metrics on any one of them shows the sum over all (prometheus_client multiprocess mode).

Each "worker" here is a real process that imports the gateway's metrics with the shared directory set, counts
requests, opens WebSocket connections and publishes a batcher's readings, as a worker of `serve --workers N` does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client import multiprocess

from mcp_classifier.telemetry import MULTIPROCESS_DIR_ENV, GatewayMetrics

WORKER = textwrap.dedent(
    """
    import sys
    from mcp_classifier.telemetry import GatewayMetrics
    from mcp_classifier.util.batch_sizes import BatchSizes

    requests, batch = int(sys.argv[1]), int(sys.argv[2])

    class Batcher:
        queue_depth = 3
        batch_sizes = BatchSizes()

    Batcher.batch_sizes.observe(batch)
    metrics = GatewayMetrics()
    for _ in range(requests):
        metrics.observe_door("rest", "ok", 0.01)
    metrics.websocket_connections.inc()
    metrics.batching.watch("local", lambda: Batcher)
    from mcp_classifier.telemetry import BatchingMirror
    BatchingMirror(metrics.batching).sync()
    """
)


def _sample(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} not in\n{text}"
    return float(match.group(1))


def test_any_worker_renders_the_sum_of_every_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, MULTIPROCESS_DIR_ENV: str(tmp_path)}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(n), str(size)], env=env) for n, size in ((3, 4), (5, 20))]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0]

    monkeypatch.setenv(MULTIPROCESS_DIR_ENV, str(tmp_path))
    text = GatewayMetrics().render().decode()
    assert _sample(text, 'mcp_classifier_door_requests_total{door="rest"}') == 8
    assert _sample(text, 'mcp_classifier_door_request_seconds_count{door="rest"}') == 8
    assert _sample(text, 'mcp_classifier_backend_batch_size_count{backend="local"}') == 2
    assert _sample(text, 'mcp_classifier_backend_batch_size_sum{backend="local"}') == 24
    assert _sample(text, 'mcp_classifier_backend_batch_size_bucket{backend="local",le="4.0"}') == 1
    assert _sample(text, "mcp_classifier_websocket_connections") == 2  # live gauges: until the supervisor hears a worker died

    for worker in workers:
        multiprocess.mark_process_dead(worker.pid, str(tmp_path))  # what the supervisor does for a dead worker
    text = GatewayMetrics().render().decode()
    assert "mcp_classifier_websocket_connections " not in text, "a dead worker's connections are gone"
    assert _sample(text, 'mcp_classifier_door_requests_total{door="rest"}') == 8, "its requests still count"
