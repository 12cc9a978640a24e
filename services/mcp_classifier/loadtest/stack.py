"""A gateway process on a free port (`mcp-classifier serve --port 0`), started and stopped by its own PID.

The load-test runner uses it for "the local stack"; the project's tests and benchmarks start their
servers with it too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

CLI = [sys.executable, "-m", "mcp_classifier.cli"]
LISTENING = re.compile(r"starting on (http://\S+)")  # the line `serve` prints once its port is bound


@dataclass
class GatewayProcess:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (the gateway drains and stops what it started), then SIGKILL if it overstays."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_gateway(
    log_path: Path,
    *serve_args: str,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    timeout_s: float = 180.0,
) -> GatewayProcess:
    """Start `serve --host 127.0.0.1 --port 0 ARGS`, learn the port from its log, wait for /ready (or /health)."""
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", "0", *serve_args],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + timeout_s
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway exited with {process.returncode}:\n{log_path.read_text(errors='replace')[-4000:]}")
        if url is None:
            match = LISTENING.search(log_path.read_text(errors="replace"))
            url = match.group(1) if match else None
        if url is not None:
            try:
                if httpx.get(f"{url}/ready" if wait_ready else f"{url}/health", timeout=2).status_code == 200:
                    return GatewayProcess(process, url, log_path)
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    process.kill()
    process.wait(timeout=10)
    raise RuntimeError(f"the gateway was not ready in {timeout_s:g} s:\n{log_path.read_text(errors='replace')[-4000:]}")
