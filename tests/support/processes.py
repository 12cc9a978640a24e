"""Real gateway processes for the tests: the local backend unless told otherwise, logs in the test's folder."""

from __future__ import annotations

import time
from pathlib import Path

from mcp_classifier.loadtest.stack import GatewayProcess, start_gateway

ServerProcess = GatewayProcess
STARTUP_TIMEOUT_S = 120.0


def start_server(tmp_dir: Path, *extra_args: str, env: dict[str, str] | None = None, wait_ready: bool = True) -> ServerProcess:
    """`mcp-classifier serve --port 0 --backend local ARGS` (a later --backend wins), ready when this returns."""
    log_path = tmp_dir / f"server-{time.monotonic_ns()}.log"
    return start_gateway(log_path, "--backend", "local", *extra_args, env=env, wait_ready=wait_ready, timeout_s=STARTUP_TIMEOUT_S)
