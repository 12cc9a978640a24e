"""uvicorn's server with a drain: on SIGTERM, /ready answers 503 first, then the listener closes.

uvicorn alone closes the listener at the signal and finishes what is in flight; a load balancer
that probes /ready only learns of it from refused connections. With a drain delay the gateway
keeps answering (so nothing in flight or just routed is lost) while /ready says 503, then shuts
down as uvicorn does. A second signal stops at once. Once drained it exits 0, so the CLI's own
cleanup (flushing spans) runs, instead of uvicorn re-raising the signal at the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn

log = logging.getLogger(__name__)


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, *, drain_delay_s: float, on_drain: Callable[[], None]) -> None:
        super().__init__(config)
        self.drain_delay_s = drain_delay_s
        self.on_drain = on_drain
        self.draining = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()  # uvicorn would raise them again at the process after its shutdown

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        second_signal, self.draining = self.draining, True
        self.on_drain()
        if second_signal or self.drain_delay_s <= 0 or self._loop is None:
            super().handle_exit(sig, frame)
            return
        log.info("signal %d: /ready answers 503; still serving for %.1f s, then stopping", sig, self.drain_delay_s)
        self._loop.call_soon_threadsafe(self._loop.call_later, self.drain_delay_s, super().handle_exit, sig, None)
