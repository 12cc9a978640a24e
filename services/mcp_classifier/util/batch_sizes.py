"""Texts per batch as a cumulative histogram, kept in plain Python.

A batcher counts its batches here and a metrics exporter reads them when it is scraped, so the
batcher needs no metrics library; the replicas' Ray histogram uses the same bounds, so the
gateway's and the replicas' batch sizes read alike on one dashboard.
"""

from __future__ import annotations

import math
from bisect import bisect_left

BATCH_SIZE_BOUNDS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # upper bounds (texts), Prometheus "le"


class BatchSizes:
    """Counts batches by size into fixed buckets; ``cumulative()`` is what a Prometheus histogram exports."""

    def __init__(self, bounds: tuple[int, ...] = BATCH_SIZE_BOUNDS) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # the last bucket is +Inf
        self.total_texts = 0

    def observe(self, size: int) -> None:
        self._counts[bisect_left(self._bounds, size)] += 1
        self.total_texts += size

    @property
    def batches(self) -> int:
        return sum(self._counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, batches of at most that size), ending with (inf, every batch)."""
        running, out = 0, []
        for bound, count in zip((*self._bounds, math.inf), self._counts, strict=True):
            running += count
            out.append((float(bound), running))
        return out
