"""How fast the shared host is at a moment: one text through the encoder, timed in process between a bench's servers.

A bench run reads every path against a floor measured once, at its start. On a shared VM the host's
own speed moves by more than a lever within a run, and nothing inside the VM shows it: in one hour of
2026-11-28 the floor read 587, then 529, then 421 texts/s with other processes at 0-2% of the machine
(docs/decisions/0001-benchmark-method-and-noise.md). So each path's server is preceded by a short check (the raw lone
text, the same figure the lone-request target is read against), and the run prints them side by side:
a reader sees whether two paths ran in the same host, and the run warns when they did not.
"""

from __future__ import annotations

import gc
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

from .floor import time_each_alone
from .host_load import LoadMark

WARM_UP_TEXTS = 5
DRIFT_WARNING = 1.15  # slowest check over fastest above which the run says its paths ran on different hosts


@dataclass(frozen=True)
class HostReading:
    label: str  # when it was taken: "before ray", "round 2/4: ray-nopin", "after the last path"
    raw_lone_ms: float
    other_cpu_pct: float | None = None  # other processes meanwhile, % of one core (host_load)


class HostSpeedCheck:
    """Keeps one CPU model loaded for the whole run, so a check costs its texts' time and not a model load.

    On a GPU reference the checks are skipped: the host they watch is the shared CPU, and a second copy
    of the model would take the device's memory from the server's replicas.
    """

    def __init__(self, settings: Settings, texts: Sequence[str]) -> None:
        self.readings: list[HostReading] = []
        self._texts = list(texts)  # the reference's texts: a check reads on the same scale as its raw lone text
        from mcp_classifier.engine.encoder import pick_device  # imports torch: paid by a bench that runs, not by its importers

        self._classifier = build_classifier(settings) if pick_device(settings.model.device).type == "cpu" else None

    def __call__(self, label: str) -> None:
        """Median ms of one text through the encoder now (about a second on a 2-core CPU); recorded under ``label`` and printed."""
        if self._classifier is None:
            return
        encode = self._classifier.encoder.encode_queries
        time_each_alone(encode, self._texts[:WARM_UP_TEXTS])
        start = LoadMark.take()
        raw_lone_ms = 1000 * statistics.median(time_each_alone(encode, self._texts))
        reading = HostReading(label, raw_lone_ms, LoadMark.take().other_pct_since(start))
        self.readings.append(reading)
        other = "" if reading.other_cpu_pct is None else f"; other processes {reading.other_cpu_pct:.0f}% of a core"
        print(f"  host check ({label}): raw lone text {reading.raw_lone_ms:.1f} ms{other}", file=sys.stderr)

    def close(self) -> None:
        self._classifier = None
        gc.collect()


def host_speed_line(reference_ms: float, readings: Sequence[HostReading]) -> str:
    """One line: the reference's raw lone text and every check, and a warning when the host moved."""
    if not readings:
        return ""
    checks = "; ".join(f"{r.label} {r.raw_lone_ms:.1f}" for r in readings)
    values = [reference_ms, *(r.raw_lone_ms for r in readings)]
    spread = max(values) / min(values)
    line = f"host speed through the run (raw lone text in process, ms): reference {reference_ms:.1f}; {checks}; slowest {spread:.2f}x the fastest"
    if spread > DRIFT_WARNING:
        line += (
            f". WARNING: the host's speed moved by more than {DRIFT_WARNING - 1:.0%} during this run: paths measured in different "
            "minutes compare less than their shares suggest (loadtests.ab_paths alternates rounds to measure a lever)"
        )
    return line
