"""The embedded node behind a loopback gateway: which --host counts as loopback, and Serve's gRPC servers kept off other addresses.

Serve binds its gRPC proxy and the replicas' gRPC servers to ``[::]`` with no setting to change it;
the hook each worker of a loopback node runs rewrites such binds to the node's IP. Checked here on
real gRPC servers in this process (the hook's patch is undone after each test). The whole node,
every socket of the real process tree: tests/e2e/test_embedded_node.py and test_loopback_sockets.py.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import os
from collections.abc import Iterator
from concurrent import futures

import grpc
import grpc._server
import grpc.aio._server
import psutil
import pytest

from mcp_classifier.embedder import ingress_ports
from mcp_classifier.embedder.ingress_ports import bind_grpc_servers_to_node_ip, node_bound
from mcp_classifier.embedder.local_cluster import (
    GRPC_BIND_HOOK,
    SINGLE_HOST_ENV,
    NodeNotOnLoopbackError,
    bindable_everywhere,
    is_loopback_host,
    loopback_node_options,
    require_loopback_node,
)

SERVER_CLASSES = (grpc.aio._server.Server, grpc._server._Server)


@pytest.fixture
def restored_grpc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """gRPC's server classes as they were before the test, whatever the hook patched on them."""
    for server_class in SERVER_CLASSES:
        for name in ("add_insecure_port", "add_secure_port"):
            monkeypatch.setattr(server_class, name, getattr(server_class, name))
    yield


def _listening_ips(port: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def _on_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "LOCALHOST", "::1", "[::1]"])
def test_loopback_hosts_keep_the_node_on_loopback(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "", "192.0.2.10", "example.internal"])
def test_any_other_host_leaves_ray_as_it_was(host: str) -> None:
    assert not is_loopback_host(host)


@pytest.mark.parametrize(
    ("address", "bound"),
    [
        ("[::]:40001", "127.0.0.1:40001"),
        ("[::]:0", "127.0.0.1:0"),
        ("0.0.0.0:9000", "127.0.0.1:9000"),
        (":9000", "127.0.0.1:9000"),
        ("10.0.0.5:9000", "10.0.0.5:9000"),  # a bind that names its host is the caller's choice
        ("localhost:9000", "localhost:9000"),
        ("unix:/tmp/grpc.sock", "unix:/tmp/grpc.sock"),
    ],
)
def test_only_wildcard_binds_are_moved_to_the_node_ip(address: str, bound: str) -> None:
    assert node_bound(address, "127.0.0.1") == bound


def test_an_ipv6_node_ip_is_bracketed() -> None:
    assert node_bound("[::]:40001", "::1") == "[::1]:40001"


def test_a_serve_style_async_server_listens_on_the_node_ip_only(restored_grpc: None) -> None:
    """As Serve's proxy and replicas open theirs: grpc.aio, "[::]" and SO_REUSEPORT as Serve passes it."""
    bind_grpc_servers_to_node_ip("127.0.0.1")

    async def run() -> tuple[int, set[str], bool]:
        server = grpc.aio.server(options=[("grpc.so_reuseport", "0")])
        port = server.add_insecure_port("[::]:0")
        await server.start()
        try:
            return port, _listening_ips(port), bindable_everywhere(port)
        finally:
            await server.stop(None)

    port, ips, free = asyncio.run(run())
    assert port and ips and all(_on_loopback(ip) for ip in ips), ips
    assert not free  # a second embedded node on this host still sees the port as taken (ingress_ports)


def test_a_threaded_server_listens_on_the_node_ip_only(restored_grpc: None) -> None:
    bind_grpc_servers_to_node_ip("127.0.0.1")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("0.0.0.0:0")
    server.start()
    try:
        ips = _listening_ips(port)
    finally:
        server.stop(None)
    assert ips and all(_on_loopback(ip) for ip in ips), ips


def test_running_the_hook_twice_wraps_once(restored_grpc: None) -> None:
    bind_grpc_servers_to_node_ip("127.0.0.1")
    once = grpc.aio._server.Server.add_insecure_port
    bind_grpc_servers_to_node_ip("127.0.0.1")
    assert grpc.aio._server.Server.add_insecure_port is once


def test_the_hook_ray_is_given_names_the_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray imports the hook by this dotted path in every worker; a rename must not leave it dangling."""
    module, _, name = GRPC_BIND_HOOK.rpartition(".")
    assert getattr(importlib.import_module(module), name) is ingress_ports.bind_grpc_servers_to_node_ip
    monkeypatch.setenv(SINGLE_HOST_ENV, "1")  # restored after the test, whatever loopback_node_options writes
    options = loopback_node_options()
    assert options == {"_node_ip_address": "127.0.0.1", "runtime_env": {"worker_process_setup_hook": GRPC_BIND_HOOK}}
    assert os.environ[SINGLE_HOST_ENV] == "0"  # or Ray would turn the loopback node IP into the routable one


def test_a_node_that_came_up_on_a_routable_address_is_refused() -> None:
    require_loopback_node("127.0.0.1")
    with pytest.raises(NodeNotOnLoopbackError, match=SINGLE_HOST_ENV):
        require_loopback_node("192.0.2.2")
