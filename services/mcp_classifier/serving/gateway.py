"""One gateway process on a bound socket: the app, uvicorn with a drain, spans flushed at the end.

`serve` runs it in its own process; with `--workers N` each worker process runs it on the socket the
supervisor bound, and the supervisor alone prints the lines scripts read.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from .. import __version__
from ..settings import ModelSettings, ServingSettings, Settings
from .lifecycle import Lifecycle

if TYPE_CHECKING:
    from ..cache.runtime import RedisRuntime
    from ..telemetry import GatewayMetrics
    from ..transports.opening import FullApp
    from ..util.asgi import ASGIApp


def bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """The socket of the HTTP doors (port 0: a free one). ``reuse_port``: SO_REUSEPORT, so that several processes'
    listening sockets share the port and the kernel spreads new connections over them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind_classify_ports(serving: ServingSettings, *, reuse_port: bool = False) -> dict[str, socket.socket]:
    """One socket per classifier's own port (``classify_ports``), by classifier name; none bound if one fails."""
    bound: dict[str, socket.socket] = {}
    try:
        for name, port in serving.classify_ports.items():
            bound[name] = bind(serving.host, port, reuse_port=reuse_port)
    except OSError:
        for sock in bound.values():
            sock.close()
        raise
    return bound


def say_classify_ports(sockets: Mapping[str, socket.socket]) -> None:
    # One line per classifier's port, after the starting line: with port 0 the line is where its port is read.
    for name, sock in sockets.items():
        print(f"mcp-classifier classifier {name}: POST /classify on {url_of(sock)}", file=sys.stderr, flush=True)


def say_starting(serving: ServingSettings, model: ModelSettings, url: str) -> None:
    # The doors answer the MCP handshake from here on; classification follows the "ready on" line.
    # Tests and scripts read the URL from this line when --port 0 was given.
    print(
        f"mcp-classifier {__version__} starting on {url} (loading backend {serving.backend}, model {model.name}; "
        "the handshake answers now, classification once ready)",
        file=sys.stderr,
        flush=True,
    )


def say_ready(serving: ServingSettings, model: ModelSettings, url: str, start_seconds: float | None, workers: int = 1) -> None:
    took = f", started in {start_seconds:.1f} s" if start_seconds is not None else ""
    processes = f", {workers} workers" if workers > 1 else ""
    print(
        f"mcp-classifier ready on {url} (backend {serving.backend}, model {model.name}{processes}{took})",
        file=sys.stderr,
        flush=True,
    )


class HttpGatewayApp:
    """The app uvicorn serves: the handshake door from the bind, the full FastAPI app once built after it.

    The process's start, readiness and drain are ``lifecycle``'s, made before the bind: a signal or a failure
    that comes before the full app is built lands there, and the full app reads it once built.
    """

    def __init__(
        self,
        settings: Settings,
        metrics: GatewayMetrics,
        redis: RedisRuntime,
        *,
        tracing: bool,
        on_ready: Callable[[float | None], None],
        services: Sequence[object],
    ) -> None:
        from ..transports.opening import OpeningApp
        from ..wiring import build_handshake_door, build_http_doors

        self._settings, self._metrics, self._redis, self._tracing = settings, metrics, redis, tracing
        self._doors = build_http_doors(settings, redis, metrics, tracing=tracing, extra_services=services)
        gateway = self._doors.gateway
        self.lifecycle = Lifecycle(
            gateway.backend,
            services=self._doors.services,
            late_services=self._doors.late_services,
            background_services=[redis],  # its link loads redis-py and connects while the handshake already answers
            startup=gateway.startup,
            on_ready=on_ready,
            freeze_gc=True,
        )
        self.asgi = OpeningApp(
            build_handshake_door(settings, self._doors, metrics),
            self._build,
            max_body_bytes=settings.serving.max_body_bytes,
            wait_s=settings.serving.request_timeout_s,
            on_failure=self.lifecycle.fail,  # the full app could not be built or started: the server stops
        )

    async def _build(self) -> FullApp:
        from ..transports.opening import FullApp
        from ..wiring import build_http_app

        # FastAPI's import is most of the app's cost: on a worker thread, the event loop answers the handshake meanwhile.
        await asyncio.to_thread(importlib.import_module, "..transports.http", __package__)
        app = build_http_app(self._settings, self._redis, self._metrics, self._doors, self.lifecycle, tracing=self._tracing)
        return FullApp(cast("ASGIApp", app), self.lifecycle.running)


def by_port(asgi: ASGIApp, classify_sockets: Mapping[str, socket.socket], metrics: GatewayMetrics) -> ASGIApp:
    """The app, with each classifier's port routed to that classifier's /classify (as is without such ports)."""
    if not classify_sockets:
        return asgi
    from ..transports.classify_ports import ClassifierPorts

    ports = {sock.getsockname()[1]: name for name, sock in classify_sockets.items()}
    return ClassifierPorts(asgi, ports, observer=metrics.observe_door)


def run_gateway(
    settings: Settings,
    metrics: GatewayMetrics,
    redis: RedisRuntime,
    sock: socket.socket,
    *,
    announce: bool,
    on_ready: Callable[[float | None], None],
    services: Sequence[object] = (),
    classify_sockets: Mapping[str, socket.socket] | None = None,
) -> int:
    """Serve until stopped; 0 after a clean stop, 1 when the backend failed to start. ``announce``: print the starting line.
    ``classify_sockets``: each classifier's own port, served by the same server (one drain, one shutdown)."""
    import uvicorn

    from ..telemetry import instrument_grpc_client, setup_tracing
    from ..transports.server import DrainingServer

    tracing = setup_tracing("mcp-classifier-gateway")
    if tracing:
        instrument_grpc_client()
    app = HttpGatewayApp(settings, metrics, redis, tracing=tracing, on_ready=on_ready, services=services)
    classify_sockets = classify_sockets or {}
    if announce:
        say_starting(settings.serving, settings.model, url_of(sock))
        say_classify_ports(classify_sockets)
    config = uvicorn.Config(
        by_port(app.asgi, classify_sockets, metrics),
        log_level=settings.serving.log_level,
        log_config=None,  # uvicorn's records go through the root handler: one format (JSON or text) for the whole stream
        access_log=False,  # the gateway writes its own line per request (protocol.correlation)
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.serving.shutdown_timeout_s),
    )
    server = DrainingServer(config, drain_delay_s=settings.serving.drain_delay_s, on_drain=app.lifecycle.start_draining)
    app.lifecycle.stop_server = lambda: setattr(server, "should_exit", True)
    try:
        server.run(sockets=[sock, *classify_sockets.values()])
    finally:
        if tracing:
            from ..telemetry import shutdown_tracing

            shutdown_tracing()
    if app.lifecycle.start_error is not None:
        print(f"mcp-classifier: the backend failed to start: {app.lifecycle.start_error}", file=sys.stderr)
        return 1
    return 0
