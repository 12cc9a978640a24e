"""A gateway on loopback leaves nothing else listening beyond loopback, on the default Ray backend as on the local one.

Ray and Serve listen on every address by default (GCS, raylet, object manager, the workers'
core-worker servers, the agents, Serve's gRPC proxy, the replicas' direct-ingress gRPC servers):
anyone who reached the host could call the replicas and skip the gateway's API keys, Host/Origin
checks and rate limit. So a real `serve --host 127.0.0.1 --port 0` (with its embedded Redis) is
started per backend, and once /ready answers, every TCP socket in LISTEN state held by the
gateway or any process under it must be on 127.0.0.0/8 or ::1 (an IPv4-mapped ::ffff:127.x
counts as loopback). UDP sockets and connected or connecting sockets are not listeners and are
not checked; unix sockets (the embedded Redis) are not network sockets at all.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Iterator
from typing import NamedTuple

import httpx
import psutil
import pytest

from mcp_classifier.cache.embedded import find_redis_server
from tests.support.processes import ServerProcess, start_server

pytestmark = [pytest.mark.slow, pytest.mark.embedded_ray]

SNAPSHOTS = 3  # listings taken a second apart: a socket a late starter opens just after /ready is seen too
RAY_SERVERS = {"gcs_server", "raylet"}  # Ray's own programs: the listing must have seen them on the Ray backend


class Listener(NamedTuple):
    ip: str
    port: int
    pid: int
    cmdline: str

    def __str__(self) -> str:
        return f"{self.ip}:{self.port} held by pid {self.pid}: {self.cmdline}"


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tcp_listeners(pid: int) -> tuple[set[Listener], set[str]]:
    """The TCP sockets in LISTEN state of ``pid`` and everything under it, and the names of those processes."""
    found: set[Listener] = set()
    names: set[str] = set()
    for proc in process_tree(pid):
        try:
            connections = proc.net_connections(kind="inet")
            names.add(proc.name())
            cmdline = " ".join(proc.cmdline()).strip()[:200] or proc.name()
        except psutil.Error:  # ended since the tree was listed: it holds nothing now
            continue
        found.update(
            Listener(conn.laddr.ip, conn.laddr.port, proc.pid, cmdline)
            for conn in connections
            if conn.type == socket.SOCK_STREAM and conn.status == psutil.CONN_LISTEN
        )
    return found, names


class Listing(NamedTuple):
    server: ServerProcess
    backend: str
    listeners: set[Listener]
    processes: set[str]


@pytest.fixture(scope="module", params=["ray", "local"])
def listing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listing]:
    """One server per backend, with its default settings (the embedded Redis included), listed once it is ready."""
    backend = str(request.param)
    server = start_server(tmp_path_factory.mktemp(f"loopback-{backend}"), "--backend", backend, env={"RAY_AUTH_MODE": "disabled"})
    try:
        listeners: set[Listener] = set()
        processes: set[str] = set()
        for snapshot in range(SNAPSHOTS):
            if snapshot:
                time.sleep(1.0)
            found, names = tcp_listeners(server.process.pid)
            listeners |= found
            processes |= names
        yield Listing(server, backend, listeners, processes)
    finally:
        server.stop()


def test_every_listening_socket_of_the_process_tree_is_on_loopback(listing: Listing) -> None:
    gateway_port = int(listing.server.url.rsplit(":", 1)[1])
    assert any(s.port == gateway_port and s.pid == listing.server.process.pid for s in listing.listeners), (
        "the listing did not see the gateway's own socket",
        *map(str, listing.listeners),
    )
    if listing.backend == "ray":
        assert listing.processes >= RAY_SERVERS, f"Ray's processes were not under the gateway: {sorted(listing.processes)}"
    if find_redis_server() is not None:
        assert "redis-server" in listing.processes, f"the embedded Redis was not under the gateway: {sorted(listing.processes)}"
    exposed = sorted((s for s in listing.listeners if not is_loopback(s.ip)), key=lambda s: (s.pid, s.port))
    assert not exposed, "listening beyond loopback:\n" + "\n".join(map(str, exposed))


def test_the_gateway_still_reaches_its_replicas(listing: Listing) -> None:
    """On loopback the replicas' address in Serve's target groups is 127.0.0.1, and the gateway calls them there."""
    if listing.backend != "ray":
        pytest.skip("the local backend has no replicas")
    embedder = httpx.get(f"{listing.server.url}/health", timeout=10).json()["embedder"]
    assert embedder["direct_ingress"] is True, embedder
    assert embedder["addresses"] and all(is_loopback(a.rsplit(":", 1)[0]) for a in embedder["addresses"]), embedder
    response = httpx.post(
        f"{listing.server.url}/mcp/tools/call",
        json={"name": "classify_text", "arguments": {"text": "write a python function that reverses a string"}},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["isError"] is False, response.text
