"""`--backend ray`: start an embedded Ray Serve, then talk to it over gRPC exactly as on Kubernetes.

The gRPC client is handed in by the composition root (wiring), and with it the health a probe gets before
the start, so the embedder package never imports the gateway's backends: doors open one way.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from typing import Generic, Literal, Protocol, TypeVar

import numpy as np

from ..classify.registry import DEFAULT
from ..classify.results import ClassificationResult, ClassifierInfo
from ..settings import Settings

# How long a start waits for the node's own Serve proxy once the app is deployed. A start-up wait, not a
# request's deadline: the doors answer the handshake meanwhile, and a loaded host once needed more than the
# 20 s deadline a test gave its requests between "application ready" and a reachable proxy.
PROXY_READY_WAIT_S = 120.0


class Health(Protocol):
    """What this backend reads of a health answer (backend.base.BackendHealth)."""

    def require_info(self) -> ClassifierInfo: ...

    def every_info(self) -> dict[str, ClassifierInfo]: ...


HealthT = TypeVar("HealthT", bound=Health)
HealthT_co = TypeVar("HealthT_co", bound=Health, covariant=True)


class EmbedderClient(Protocol[HealthT_co]):
    """What this backend needs of the gateway's gRPC client (backend.grpc_client.GrpcBackend)."""

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]: ...
    async def health(self, *, need_info: bool = False) -> HealthT_co: ...
    async def reload_categories(self) -> bool: ...
    async def wait_until_ready(self, timeout_s: float) -> None: ...
    async def embed(self, texts: Sequence[str], kind: Literal["query", "document"]) -> np.ndarray: ...


class EmbeddedRayBackend(Generic[HealthT]):
    """A ClassificationBackend (and Reloadable) over the client ``client_factory`` makes once Ray is up; a probe
    before that gets ``not_started``."""

    def __init__(self, settings: Settings, client_factory: Callable[[str], EmbedderClient[HealthT]], *, not_started: HealthT) -> None:
        self._settings = settings
        self._client_factory = client_factory
        self._not_started = not_started
        self._client: EmbedderClient[HealthT] | None = None
        self._started_ray = False
        self._reload_generation = 0

    @property
    def client(self) -> EmbedderClient[HealthT]:
        if self._client is None:
            raise RuntimeError("embedded Ray backend not started")
        return self._client

    async def start(self) -> None:
        from .local_cluster import start_local_serve

        port = await asyncio.to_thread(start_local_serve, self._settings)
        self._started_ray = True
        _reclaim_signal_handlers()
        self._client = self._client_factory(f"127.0.0.1:{port}")
        await self._client.start()
        await self._client.wait_until_ready(timeout_s=max(self._settings.serving.request_timeout_s, PROXY_READY_WAIT_S))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._started_ray:
            from .local_cluster import stop_local_serve

            await asyncio.to_thread(stop_local_serve)
            self._started_ray = False

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        return await self.client.predict(texts, classifier)

    async def health(self, *, need_info: bool = False) -> HealthT:
        if need_info:
            return await self.client.health(need_info=True)
        if self._client is None:
            return self._not_started
        return await self._client.health()

    async def embed(self, texts: Sequence[str], kind: Literal["query", "document"]) -> np.ndarray:
        return await self.client.embed(texts, kind)

    async def reload_categories(self) -> bool:
        """Reloadable: bump user_config's reload_generation: Serve reconfigures every replica, each re-reads the file."""
        from .local_cluster import deploy_app

        before = await self._served()
        self._reload_generation += 1
        await asyncio.to_thread(deploy_app, self._settings, self._reload_generation)
        await self.client.reload_categories()  # drops the client's cached Info
        # Compared here, not by the client: a Classify answer may clear its cache meanwhile.
        return await self._served() != before

    async def _served(self) -> dict[str, str]:
        """Each classifier's category_set_version: a reload that moves any of them put a new version live."""
        return {name: info.category_set_version for name, info in (await self.client.health(need_info=True)).every_info().items()}


def _reclaim_signal_handlers() -> None:
    """ray.init installs a native SIGTERM handler that kills the process after logging; put the
    Python handlers (uvicorn's graceful shutdown) back so SIGTERM stops Ray cleanly."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(sig)
        if callable(handler):
            signal.signal(sig, handler)
