"""One gateway process on a bound socket: the app, uvicorn with a drain, spans flushed at the end.

`serve` runs it in its own process; with `--workers N` each worker process runs it on the socket the
supervisor bound, and the supervisor alone prints the lines scripts read.
"""

from __future__ import annotations

import math
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .. import __version__
from ..settings import Settings

if TYPE_CHECKING:
    from ..cache.runtime import RedisRuntime
    from ..telemetry import GatewayMetrics


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


def say_starting(settings: Settings, url: str) -> None:
    # The doors answer the MCP handshake from here on; classification follows the "ready on" line.
    # Tests and scripts read the URL from this line when --port 0 was given.
    print(
        f"mcp-classifier {__version__} starting on {url} (loading backend {settings.backend}, model {settings.model}; "
        "the handshake answers now, classification once ready)",
        file=sys.stderr,
        flush=True,
    )


def say_ready(settings: Settings, url: str, start_seconds: float | None, workers: int = 1) -> None:
    took = f", started in {start_seconds:.1f} s" if start_seconds is not None else ""
    processes = f", {workers} workers" if workers > 1 else ""
    print(
        f"mcp-classifier ready on {url} (backend {settings.backend}, model {settings.model}{processes}{took})",
        file=sys.stderr,
        flush=True,
    )


def run_gateway(
    settings: Settings,
    metrics: GatewayMetrics,
    redis: RedisRuntime,
    sock: socket.socket,
    *,
    announce: bool,
    on_ready: Callable[[float | None], None],
    services: Sequence[object] = (),
) -> int:
    """Serve until stopped; 0 after a clean stop, 1 when the backend failed to start. ``announce``: print the starting line."""
    import uvicorn

    from ..telemetry import instrument_grpc_client, setup_tracing
    from ..transports.server import DrainingServer
    from ..wiring import build_http_app

    tracing = setup_tracing("mcp-classifier-gateway")
    if tracing:
        instrument_grpc_client()
    app = build_http_app(settings, redis, metrics, tracing=tracing, on_ready=on_ready, extra_services=services)
    if announce:
        say_starting(settings, url_of(sock))
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        log_config=None,  # uvicorn's records go through the root handler: one format (JSON or text) for the whole stream
        access_log=False,  # the gateway writes its own line per request (protocol.correlation)
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(settings.shutdown_timeout_s),
    )
    server = DrainingServer(config, drain_delay_s=settings.drain_delay_s, on_drain=app.state.start_draining)
    app.state.stop_server = lambda: setattr(server, "should_exit", True)
    try:
        server.run(sockets=[sock])
    finally:
        if tracing:
            from ..telemetry import shutdown_tracing

            shutdown_tracing()
    if app.state.start_error is not None:
        print(f"mcp-classifier: the backend failed to start: {app.state.start_error}", file=sys.stderr)
        return 1
    return 0
