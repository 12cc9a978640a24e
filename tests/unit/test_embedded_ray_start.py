"""The embedded Ray node's start: one more try where the first timed out, and ports picked beforehand that Ray never wants.

Fakes stand in for ray.init and ray.shutdown: what is checked is the retry rule itself (a real start
that times out cannot be provoked on demand; every real start runs in the Ray tests, tests/e2e).
Ending what a failed start left running is checked on real processes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_classifier.embedder import local_cluster
from mcp_classifier.embedder.local_cluster import end_processes_under, init_ray_retrying

NODE_TIMEOUT = Exception(
    "The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded."
)


class FakeRay:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.inits = 0
        self.shutdowns = 0

    def init(self) -> None:
        self.inits += 1
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_a_start_that_timed_out_is_cleared_up_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    ray = FakeRay([NODE_TIMEOUT])
    init_ray_retrying(ray.init, ray.shutdown, wait_s=0)
    assert (ray.inits, ray.shutdowns) == (2, 1)
    assert "timed out while starting" in caplog.text


def test_a_second_timeout_is_raised_after_the_last_attempt() -> None:
    ray = FakeRay([NODE_TIMEOUT, NODE_TIMEOUT, NODE_TIMEOUT])
    with pytest.raises(Exception, match="timed out during startup"):
        init_ray_retrying(ray.init, ray.shutdown, attempts=2, wait_s=0)
    assert (ray.inits, ray.shutdowns) == (2, 1)


def test_any_other_failure_is_raised_at_once() -> None:
    ray = FakeRay([ValueError("num_cpus must be positive")])
    with pytest.raises(ValueError, match="num_cpus"):
        init_ray_retrying(ray.init, ray.shutdown, wait_s=0)
    assert (ray.inits, ray.shutdowns) == (1, 0)


def test_a_start_that_works_is_not_repeated() -> None:
    ray = FakeRay([])
    init_ray_retrying(ray.init, ray.shutdown, wait_s=0)
    assert (ray.inits, ray.shutdowns) == (1, 0)


def test_what_a_failed_start_left_running_is_ended_and_nothing_else(tmp_path: Path) -> None:
    """Real child processes: one runs a program of the package (as Ray's GCS and raylet do), one does not."""
    package = tmp_path / "ray"
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    from_package = subprocess.Popen([*sleeper, str(package / "core" / "raylet")])
    other = subprocess.Popen(sleeper)
    sibling = subprocess.Popen([*sleeper, str(tmp_path / "rayon" / "worker")])  # a folder whose name starts the same
    try:
        assert end_processes_under(str(package)) == 1
        assert from_package.wait(timeout=10) is not None
        assert other.poll() is None and sibling.poll() is None
    finally:
        for proc in (from_package, other, sibling):
            proc.kill()
            proc.wait()


class KernelHandsOut:
    """Stands in for the kernel's choice of a free port (bind to port 0), which a test cannot steer."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.closed = 0

    def socket(self, *args: object) -> KernelHandsOut.Bound:
        return KernelHandsOut.Bound(self)

    class Bound:
        def __init__(self, kernel: KernelHandsOut) -> None:
            self.kernel = kernel
            self.port = 0

        def bind(self, address: tuple[str, int]) -> None:
            self.port = self.kernel.ports.pop(0)

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

        def close(self) -> None:
            self.kernel.closed += 1


def test_a_port_picked_before_ray_starts_is_never_one_ray_binds_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = KernelHandsOut([52365, 41234])
    monkeypatch.setattr(local_cluster.socket, "socket", kernel.socket)
    assert local_cluster.free_port() == 41234
    assert kernel.closed == 2  # both sockets released once the port is chosen


def test_a_free_port_is_really_free() -> None:
    port = local_cluster.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert port not in local_cluster.RAY_DEFAULT_PORTS
