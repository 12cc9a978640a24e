"""Real gateway processes (`mcp-classifier serve --port 0`) started on free ports and stopped by their own PID."""

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
STARTUP_TIMEOUT_S = 120.0


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_server(tmp_dir: Path, *extra_args: str, env: dict[str, str] | None = None, wait_ready: bool = True) -> ServerProcess:
    """Start `mcp-classifier serve --port 0` (in-process backend unless told otherwise), read the bound
    port from its log, and wait for /ready (or only for /health when wait_ready is False)."""
    log_path = tmp_dir / f"server-{time.monotonic_ns()}.log"
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--backend", "local", *extra_args],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log_path.read_text()}")
        if url is None:
            match = re.search(r"listening on (http://\S+)", log_path.read_text(errors="replace"))
            url = match.group(1) if match else None
        if url is not None:
            try:
                if httpx.get(f"{url}/ready" if wait_ready else f"{url}/health", timeout=2).status_code == 200:
                    return ServerProcess(process, url, log_path)
            except httpx.TransportError:
                pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"server did not become ready in {STARTUP_TIMEOUT_S}s:\n{log_path.read_text()}")
