"""The embedded Ray node's start: one more try where the first timed out, a wait on past Serve's fixed wait for
its proxy, and ports picked beforehand that nothing else takes.

Fakes stand in for ray.init, ray.shutdown and serve.start: what is checked is the retry and wait rules themselves (a real start
that times out cannot be provoked on demand; every real start runs in the Ray tests, tests/e2e).
Ending what a failed start left running is checked on real processes.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_classifier.embedder import local_cluster
from mcp_classifier.embedder.local_cluster import (
    ProxyStartTimeoutError,
    end_processes_under,
    init_ray_retrying,
    start_serve_waiting_for_proxy,
)

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
    assert local_cluster.kernel_port() == 41234
    assert kernel.closed == 2  # both sockets released once the port is chosen


def test_a_free_port_is_really_free() -> None:
    port = local_cluster.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    assert port not in local_cluster.RAY_DEFAULT_PORTS


def _free_pair_in_window() -> int:
    """A port p in the picked window with p and p + 1 both free on every address (real sockets)."""
    for port in range(local_cluster.PICKED_PORTS.start, local_cluster.PICKED_PORTS.stop - 1):
        if local_cluster.bindable_everywhere(port) and local_cluster.bindable_everywhere(port + 1):
            return port
    pytest.fail("no two free neighbouring ports in the picked window")


def test_an_outgoing_connection_holds_an_ephemeral_port_on_every_address() -> None:
    """Why ports are picked below the ephemeral range: any connection Ray opens may be handed one of those ports."""
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        taken = client.getsockname()[1]
        assert taken >= local_cluster.ephemeral_low()
        assert not local_cluster.bindable_everywhere(taken)


def test_a_picked_port_is_below_the_ephemeral_range_and_free_on_every_address() -> None:
    for _ in range(20):
        port = local_cluster.free_port()
        assert port in local_cluster.PICKED_PORTS
        assert port < local_cluster.ephemeral_low()
        assert port not in local_cluster.RAY_DEFAULT_PORTS
        with socket.socket() as sock:
            sock.bind(("0.0.0.0", port))


def test_a_port_held_on_one_address_is_passed_over() -> None:
    held = _free_pair_in_window()
    with socket.create_server(("127.0.0.1", held)):
        assert not local_cluster.bindable_everywhere(held)
        assert local_cluster.free_port(window=range(held, held + 2)) == held + 1


def test_where_nothing_below_the_ephemeral_range_is_free_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kernels_range_starts = local_cluster.ephemeral_low()
    monkeypatch.setattr(local_cluster, "ephemeral_low", lambda: 1024)  # a host whose whole port space is ephemeral
    port = local_cluster.free_port()
    assert port >= kernels_range_starts  # handed out by the kernel, from its real ephemeral range
    assert "taking one the kernel picks" in caplog.text
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("text", "low"),
    [
        ("32768\t60999\n", 32768),
        ("15000 65000\n", 15000),
        ("", local_cluster.LINUX_EPHEMERAL_LOW),
        ("x y", local_cluster.LINUX_EPHEMERAL_LOW),
    ],
)
def test_the_ephemeral_range_is_read_from_the_kernel_file(tmp_path: Path, text: str, low: int) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    assert local_cluster.ephemeral_low(path) == low


def test_an_unreadable_range_file_means_the_linux_default(tmp_path: Path) -> None:
    assert local_cluster.ephemeral_low(tmp_path / "absent") == local_cluster.LINUX_EPHEMERAL_LOW


PROXY_TIMEOUT = TimeoutError("HTTP proxies not available after 60s.")  # serve.start's words when its fixed wait passes


class ActorDiedError(Exception):
    """Shaped like ray.exceptions.ActorDiedError for a proxy the controller killed at its ready check."""


PROXY_KILLED = ActorDiedError(
    "The actor died unexpectedly before finishing this task.\n\tclass_name: ProxyActor\n\tnamespace: serve\n"
    "The actor is dead because it was killed by `ray.kill`."
)


class FakeServe:
    """serve.start that may raise Ray's proxy timeout, and a proxy that reports up after some reads."""

    def __init__(self, start_failure: Exception | None, up_after_reads: int | None) -> None:
        self.start_failure = start_failure
        self.up_after_reads = up_after_reads
        self.starts = 0
        self.reads = 0

    def start(self) -> None:
        self.starts += 1
        if self.start_failure:
            raise self.start_failure

    def proxies_up(self) -> bool:
        self.reads += 1
        return self.up_after_reads is not None and self.reads > self.up_after_reads


@pytest.mark.parametrize("late", [PROXY_TIMEOUT, PROXY_KILLED], ids=["serve.start-timed-out", "controller-killed-the-proxy"])
def test_a_proxy_that_misses_rays_fixed_waits_is_waited_on_until_it_is_up(late: Exception, caplog: pytest.LogCaptureFixture) -> None:
    serve = FakeServe(late, up_after_reads=3)
    start_serve_waiting_for_proxy(serve.start, serve.proxies_up, budget_s=30, poll_s=0)
    assert (serve.starts, serve.reads) == (1, 4)  # started once: the controller it created goes on starting a proxy
    assert f"not up within Ray's own wait ({str(late).splitlines()[0]}" in caplog.text
    assert "ray_proxy_start_timeout_s" in caplog.text


def test_a_start_whose_proxy_is_up_at_once_reads_its_state_once(caplog: pytest.LogCaptureFixture) -> None:
    serve = FakeServe(None, up_after_reads=0)
    start_serve_waiting_for_proxy(serve.start, serve.proxies_up, budget_s=30, poll_s=0)
    assert (serve.starts, serve.reads) == (1, 1)
    assert "waiting on" not in caplog.text


def test_a_proxy_never_up_fails_the_start_once_the_budget_is_spent() -> None:
    serve = FakeServe(PROXY_TIMEOUT, up_after_reads=None)
    began = time.monotonic()
    with pytest.raises(ProxyStartTimeoutError, match=r"not up within 0.3 s .*ray_proxy_start_timeout_s"):
        start_serve_waiting_for_proxy(serve.start, serve.proxies_up, budget_s=0.3, poll_s=0.05)
    assert serve.reads >= 2  # it kept reading until the budget ran out, then gave up
    assert time.monotonic() - began < 30  # bounded by the budget, not left waiting


@pytest.mark.parametrize(
    "failure", [TimeoutError("the GCS did not answer"), RuntimeError("port 9000 is in use"), ActorDiedError("class_name: ServeController")]
)
def test_any_other_start_failure_is_raised_at_once(failure: Exception) -> None:
    serve = FakeServe(failure, up_after_reads=0)
    with pytest.raises(type(failure), match=str(failure)):
        start_serve_waiting_for_proxy(serve.start, serve.proxies_up, budget_s=30, poll_s=0)
    assert serve.reads == 0
