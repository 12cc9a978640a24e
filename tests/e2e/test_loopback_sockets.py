"""A gateway on loopback leaves nothing else listening beyond loopback: the local backend here, the default Ray
backend in test_embedded_node.py (which shares its node with the other embedded-node tests).

A real `serve --host 127.0.0.1 --port 0` with its default settings (the session's gateway, its embedded Redis
included): every TCP socket in LISTEN state held by the gateway or any process under it must be on 127.0.0.0/8
or ::1 (an IPv4-mapped ::ffff:127.x counts as loopback). UDP sockets and connected or connecting sockets are
not listeners and are not checked; unix sockets (the embedded Redis) are not network sockets at all.
"""

from __future__ import annotations

import pytest

from mcp_classifier.redis_io.embedded import find_redis_server
from tests.support.listeners import exposed_listeners, tcp_listeners_over_time
from tests.support.processes import ServerProcess

pytestmark = [pytest.mark.slow]


def test_every_listening_socket_of_the_process_tree_is_on_loopback(server: ServerProcess) -> None:
    listeners, processes = tcp_listeners_over_time(server.process.pid)
    gateway_port = int(server.url.rsplit(":", 1)[1])
    assert any(s.port == gateway_port and s.pid == server.process.pid for s in listeners), (
        "the listing did not see the gateway's own socket",
        *map(str, listeners),
    )
    if find_redis_server() is not None:
        assert "redis-server" in processes, f"the embedded Redis was not under the gateway: {sorted(processes)}"
    exposed = exposed_listeners(listeners)
    assert not exposed, "listening beyond loopback:\n" + "\n".join(map(str, exposed))
