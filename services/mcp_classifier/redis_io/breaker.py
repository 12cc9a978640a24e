"""A circuit breaker for the Redis link.

Hand-written on purpose: it sits on the cache-hit path, whose budget is about a millisecond, so
it must be a plain synchronous check (no await, no lock, no state store). The maintained asyncio
libraries (purgatory) wrap each call in an async context manager with a pluggable state store;
aiobreaker has seen no release since 2021, and pybreaker's async support needs Tornado. The
logic here is small: K consecutive failures open the circuit; while open, callers skip Redis;
the owner probes in the background after a cool-down and closes the circuit on success.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class CircuitBreaker:
    def __init__(
        self,
        failure_threshold: int,
        cooldown_s: float,
        *,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._on_open = on_open
        self._on_close = on_close
        self._clock = clock
        self.consecutive_failures = 0
        self.opened_at: float | None = None

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def probe_due(self) -> bool:
        """True when the circuit is open and the cool-down has passed: time to try Redis again."""
        return self.opened_at is not None and self._clock() - self.opened_at >= self.cooldown_s

    def record_success(self) -> None:
        self.consecutive_failures = 0
        if self.opened_at is not None:
            self.opened_at = None
            if self._on_close:
                self._on_close()

    def record_failure(self) -> bool:
        """Count one failure; returns True when this failure opened the circuit."""
        self.consecutive_failures += 1
        if self.opened_at is None and self.consecutive_failures >= self.failure_threshold:
            self.opened_at = self._clock()
            if self._on_open:
                self._on_open()
            return True
        return False

    def record_probe_failure(self) -> None:
        """A background probe failed: stay open for another cool-down."""
        self.opened_at = self._clock()
