"""Infinity (michaelfeil/infinity, ``infinity-emb``), the embeddings peer, as a real server process on a free port.

It lives in a virtual environment of its own (its pinned transformers and sentence-transformers are not the
project's), so it is found by path, never imported. It runs as it ships: libgomp's default thread wait
(the OMP_WAIT_POLICY and GOMP_SPINCOUNT this bench gives our server are taken out of its environment unless
named for it), no vector disk cache, no usage statistics sent. Like our servers it is stopped by its own PID and
its descendants are ended by pid (harness.servers).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from .cpu import ProcessTree

INFINITY_ENV = "INFINITY_BIN"
STARTUP_TIMEOUT_S = 600.0  # it times batches of 1 and 256 tokens before it answers: 30 s on a busy 2-core host
# Our knobs: the peer keeps libgomp's own default unless a run names them for it (``extra_env``).
WAIT_ENV = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
INSTALL_HINT = (
    "Infinity is not installed here. It installs offline, in a virtual environment of its own (outside the "
    "repository), torch first in the same command:\n"
    "    python3 -m venv /work/infinity-venv\n"
    "    /work/infinity-venv/bin/pip install torch==2.13.0 'infinity-emb[torch,server]'\n"
    f"then pass --infinity /work/infinity-venv/bin/infinity_emb (or set {INFINITY_ENV})."
)


def find_infinity(given: str | None) -> Path | None:
    """The ``infinity_emb`` executable: --infinity, else $INFINITY_BIN, else none (the bench then says how to install it)."""
    candidate = given or os.environ.get(INFINITY_ENV, "")
    if not candidate:
        return None
    found = shutil.which(candidate)
    return Path(found) if found else None


def free_port() -> int:
    """A loopback port free now (Infinity takes no port 0): the kernel's pick, released for the server to bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def infinity_env(extra_env: Mapping[str, str]) -> dict[str, str]:
    """This process's environment for the peer, without our wait knobs, offline, telemetry off, then ``extra_env``."""
    env = {k: v for k, v in os.environ.items() if k not in WAIT_ENV}
    env.update({"DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"})
    env.update(extra_env)
    return env


class InfinityServer:
    """``infinity_emb v2 --model-id DIR --engine torch --device cpu`` on 127.0.0.1 and a free port."""

    def __init__(self, binary: Path, model_dir: str, extra_env: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self.model_dir = model_dir
        self.env = infinity_env(extra_env or {})
        self.log_path = Path(tempfile.mkstemp(prefix="bench-infinity-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None
        self.tree: ProcessTree | None = None
        self.url = ""

    def command(self, port: int) -> list[str]:
        return [
            str(self.binary),
            "v2",
            "--model-id",
            self.model_dir,
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--no-vector-disk-cache",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        """Start it and wait for ``GET /health``; on an early exit or a timeout, raise with its log's tail."""
        port = free_port()
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.command(port), env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.tree = ProcessTree(self.process.pid)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"infinity_emb exited ({self.process.returncode}) before it answered:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    self.tree.scan()
                    return self.url
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"infinity_emb did not answer /health within {timeout_s:g} s:\n{self.log()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM by PID, SIGKILL if it hangs; then any descendant that outlived it, by pid."""
        if self.process is None or self.tree is None:
            return
        self.tree.scan()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pid in self.tree.survivors():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
