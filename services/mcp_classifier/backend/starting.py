"""A backend that starts in the background, so every door answers the MCP handshake at once.

Loading the model (or starting the embedded Ray node) takes seconds to minutes; an MCP client that
spawns `mcp-classifier stdio` gives up long before that if `initialize` waits for it. `initialize`,
`ping`, `server/discover` and `tools/list` need no model, so the doors open straight away and only a
call that needs the model waits for the start, up to the request deadline; after that it gets
`backend_unavailable` (retryable) saying the model is still loading. /ready stays 503 until then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..classify.registry import DEFAULT
from ..classify.results import ClassificationResult
from .base import BackendHealth, BackendUnavailable, BackendWrapper, ClassificationBackend, EmbeddingKind, reload_categories_of

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class StartingBackend(BackendWrapper):
    """Wraps any backend: start() returns at once and the inner start runs as a task; calls that need the model
    wait for it."""

    def __init__(self, inner: ClassificationBackend, *, wait_s: float) -> None:
        super().__init__(inner)
        self._wait_s = wait_s
        self._task: asyncio.Task[None] | None = None
        self.start_seconds: float | None = None

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._start_inner(), name="backend-start")

    async def _start_inner(self) -> None:
        began = time.perf_counter()
        try:
            await self.inner.start()
        except Exception:
            log.exception("the classification backend failed to start")
            raise
        self.start_seconds = time.perf_counter() - began
        log.info("the classification backend is ready (started in %.1f s)", self.start_seconds)

    async def wait_started(self) -> None:
        """Until the start ends; raises what the start raised (the caller decides whether the process lives on)."""
        if self._task is None:
            raise BackendUnavailable("the classification backend was never started")
        await asyncio.shield(self._task)

    @property
    def loading(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def start_error(self) -> BaseException | None:
        if self._task is None or not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.inner.close()

    async def _started(self) -> None:
        """A call that needs the model waits for the start, up to the request deadline."""
        if self._task is None:
            raise BackendUnavailable("the classification backend was never started")
        if not self._task.done():
            try:
                async with asyncio.timeout(self._wait_s):
                    await asyncio.shield(self._task)
            except TimeoutError:
                raise BackendUnavailable(
                    f"the model is still loading after {self._wait_s:g} s; /ready answers 200 once it can classify"
                ) from None
            except Exception:  # noqa: BLE001 - said below, as the start's own error
                pass
        error = self.start_error
        if error is not None:
            raise BackendUnavailable(f"the classification backend failed to start: {error}")

    def _not_started(self) -> str | None:
        """Why a probe answers not ready without asking the inner backend; None once the start has succeeded."""
        if self._task is None:
            return "the classification backend was never started"
        if not self._task.done():
            return "the model is still loading"
        error = self.start_error
        return None if error is None else f"the classification backend failed to start: {error}"

    # ---- the calls that need the started backend -------------------------------------------------
    async def health(self, *, need_info: bool = False) -> BackendHealth:
        """A probe answers at once while the start runs; a caller that needs the info waits for it, as a predict does."""
        if need_info:
            try:
                await self._started()
            except BackendUnavailable as exc:
                return BackendHealth.failed(exc)
            return await self.inner.health(need_info=True)
        why = self._not_started()
        if why is not None:
            return BackendHealth(ready=False, detail=why)
        return await self.inner.health()

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        await self._started()
        return await self.inner.predict(texts, classifier)

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        await self._started()
        return await self.inner.embed(texts, kind)

    async def reload_categories(self) -> bool:
        """Reloadable: the reload waits for the start, then goes to the backend that holds the categories."""
        await self._started()
        return await reload_categories_of(self.inner)
