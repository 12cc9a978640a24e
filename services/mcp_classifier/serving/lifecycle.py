"""One gateway process's life: what starts when, when it is ready, how it drains and stops.

The HTTP door reads this (transports.http.DoorLifecycle) and runs ``running()`` as its ASGI lifespan; it keeps
no start-up state of its own. Light on purpose: built before the port is bound, before FastAPI is imported.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..backend.base import ClassificationBackend
    from ..backend.starting import StartingBackend


class Lifecycle:
    """Start, readiness, drain and shutdown of the backend and the services around it.

    ``services`` are objects with async ``start()``/``close()`` (e.g. the tool embeddings' link) started before the
    backend and closed after it; an optional ``health()`` dict of theirs is merged into /health. ``late_services``
    start after the backend and close before it (the public gRPC door). ``background_services`` start as tasks while
    the doors open (the Redis link: loading redis-py and connecting must not hold the handshake); ``on_ready`` waits
    for them. With ``startup`` (the backend's background start, under any wrapper) every door answers at once and
    the late services, ``on_ready`` and the GC freeze follow the start. ``freeze_gc`` (for a process that serves
    only this) moves everything alive after start-up out of the cyclic GC's reach.
    """

    def __init__(
        self,
        backend: ClassificationBackend,
        *,
        services: Sequence[Any] = (),
        late_services: Sequence[Any] = (),
        background_services: Sequence[Any] = (),
        startup: StartingBackend | None = None,
        on_ready: Callable[[float | None], None] | None = None,
        freeze_gc: bool = False,
    ) -> None:
        self._backend = backend
        self._services = services
        self._late_services = late_services
        self._background_services = background_services
        self._startup = startup
        self._on_ready = on_ready
        self._freeze_gc = freeze_gc
        self._drain_hooks: list[Callable[[], None]] = []
        self.draining = False
        self.start_error: BaseException | None = None  # why the process could not start: it stops, and `serve` exits 1
        self.stop_server: Callable[[], None] = lambda: None  # the server sets this: a failed start stops it

    # ---- what the doors read ----------------------------------------------------------------------------
    @property
    def loading(self) -> bool:
        return self._startup is not None and self._startup.loading

    @property
    def start_failure(self) -> BaseException | None:
        return self._startup.start_error if self._startup is not None else None

    async def ready(self) -> bool:
        """The backend's probe: cheap, and it never waits for a start in progress."""
        return (await self._backend.health()).ready

    def health(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        for service in (*self._background_services, *self._services):
            if hasattr(service, "health"):
                extra.update(service.health())
        return extra

    # ---- drain and failure ------------------------------------------------------------------------------
    def on_drain(self, hook: Callable[[], None]) -> None:
        """``hook`` runs when draining starts; at once where it has (a signal that came before the app was built)."""
        self._drain_hooks.append(hook)
        if self.draining:
            hook()

    def start_draining(self) -> None:
        """SIGTERM (transports.server): /ready answers 503 and the doors' hooks run (open SSE streams end)."""
        self.draining = True
        for hook in self._drain_hooks:
            hook()

    def fail(self, error: BaseException) -> None:
        """The process cannot classify: keep why, and stop the server."""
        self.start_error = error
        self.stop_server()

    # ---- start and stop ---------------------------------------------------------------------------------
    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Everything started on entry (the backend's start may go on in the background), stopped on exit."""
        # Background services close last, whether or not their start finished (the Redis link outlives its users).
        started: list[Any] = list(self._background_services)
        background = [asyncio.create_task(service.start(), name=f"start-{type(service).__name__}") for service in self._background_services]
        try:
            for service in self._services:
                await service.start()
                started.append(service)
            await self._backend.start()  # with a StartingBackend (startup) this returns at once: the doors open now
            async with self._late_doors(background):
                yield
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for service in reversed(started):
                await service.close()

    @asynccontextmanager
    async def _late_doors(self, background: list[asyncio.Task[None]]) -> AsyncIterator[None]:
        """The late services, opened once the backend can answer (now, or after its background start); closed, then
        the backend, on exit."""
        late_started: list[Any] = []
        bring_up = asyncio.create_task(self._when_started(late_started, background)) if self._startup is not None else None
        try:
            if bring_up is None:
                await asyncio.gather(*background)
                await self._open_late_doors(late_started)
            yield
        finally:
            if bring_up is not None:
                bring_up.cancel()
                await asyncio.gather(bring_up, return_exceptions=True)
            for service in reversed(late_started):
                await service.close()
            await self._backend.close()

    async def _when_started(self, late_started: list[Any], background: list[asyncio.Task[None]]) -> None:
        """The backend's background start: then the late doors, the ready line; a failed start stops the server."""
        assert self._startup is not None
        try:
            await self._startup.wait_started()
            await asyncio.gather(*background)
            await self._open_late_doors(late_started)
        except Exception as exc:  # noqa: BLE001 - the process cannot classify: say why and stop
            self.fail(exc)
            return
        if self._on_ready is not None:
            self._on_ready(self._startup.start_seconds)

    async def _open_late_doors(self, late_started: list[Any]) -> None:
        # What start-up loaded (torch, the model, Ray's client) lives as long as the process:
        # freeze it out of the cyclic GC, whose full collections otherwise scan it all and
        # stalled the event loop ~190 ms at a time, about once a second under load.
        if self._freeze_gc:
            gc.collect()
            gc.freeze()
        for service in self._late_services:  # doors that should open only once the backend can answer (gRPC)
            await service.start()
            late_started.append(service)
