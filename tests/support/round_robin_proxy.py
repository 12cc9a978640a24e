"""A tiny TCP proxy that sends each new connection to the next backend in turn (a per-connection load balancer).

With two gateways behind it, an HTTP client's long-lived SSE stream lands on one and its next
connection (the POSTs) on the other: what a Kubernetes Service does to legacy SSE clients.
"""

from __future__ import annotations

import itertools
import socket
import threading

from tests.support.tcp_forwarder import splice


class RoundRobinProxy:
    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self._backends = itertools.cycle(backends)
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port: int = self._server.getsockname()[1]
        self.connections: list[tuple[str, int]] = []  # the backend each accepted connection went to, in order
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RoundRobinProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            backend = next(self._backends)
            self.connections.append(backend)
            try:
                upstream = socket.create_connection(backend, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            splice(client, upstream)
