"""Categories hot reload in the gateway: a file watch and SIGHUP both ask the backend chain to reload.

The request goes through the outermost backend (a ``ReloadableBackend``: each wrapper passes it on) so every
layer hears of it: the cache re-keys, the gRPC client drops its cached Info, and whoever holds the model has its
registry re-read the file (classify.registry). The watch is the registry's own (``CategorySource.watch``), the one a Ray replica uses.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Mapping

from .backend.base import BackendHealth, ReloadableBackend
from .classify.registry import DEFAULT, CategorySource
from .classify.reload_report import FILE_CHANGE, log_reload

log = logging.getLogger(__name__)


class HotReload:
    def __init__(self, backend: ReloadableBackend, sources: Mapping[str, CategorySource]) -> None:
        self._backend = backend
        self._sources = dict(sources)  # the classifiers' files, by name (classify.registry.reloadable_sources)
        self._stop = threading.Event()
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refused: set[str] = set()  # classifiers whose last reload was refused: a file fixed back to the live version says so

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        for source in self._sources.values():
            source.watch(self._from_watch_thread, self._stop)
        try:
            self._loop.add_signal_handler(signal.SIGHUP, lambda: asyncio.ensure_future(self.reload("SIGHUP")))
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no SIGHUP here
            log.warning("SIGHUP reload unavailable; the file watch still applies changes")

    async def close(self) -> None:
        self._stop.set()
        if self._loop is not None:
            try:
                self._loop.remove_signal_handler(signal.SIGHUP)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    async def reload(self, trigger: str) -> bool:
        """Ask the backend chain to reload every classifier, then say in one line each how it went (read from the
        backend's info: a classifier whose versions moved went live)."""
        assert self._lock is not None
        async with self._lock:  # one reload at a time: a watch event and SIGHUP may coincide
            try:
                before = _versions(await self._backend.health(need_info=True))
                changed = await self._backend.reload_categories()
                after = await self._backend.health(need_info=True)
                infos = after.every_info()
            except Exception:
                log.exception("categories reload (%s) failed; the current categories stay live", trigger)
                return False
            for name, info in infos.items():
                # One classifier: the backend's word. Several: the ones whose versions moved are the ones that went live.
                moved = changed and (len(infos) == 1 or before.get(name) != (info.category_set_version, info.policy_version))
                said = trigger if name == DEFAULT else f"{trigger}, classifier {name}"
                log_reload(log, said, moved, info, refused_before=name in self._refused)
                if info.reload_error is not None:
                    self._refused.add(name)
                else:
                    self._refused.discard(name)
        return changed

    def _from_watch_thread(self) -> None:
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self.reload(FILE_CHANGE), self._loop).result()


def _versions(health: BackendHealth) -> dict[str, tuple[str, str]]:
    """Each classifier's (category set, policy) versions, to tell which ones a reload put live."""
    infos = health.every_info() if health.info is not None else {}
    return {name: (info.category_set_version, info.policy_version) for name, info in infos.items()}
