"""How much of the shared host other processes took while a bench measured: beside the floor, each check, each level.

The host-speed checks (host_speed) catch a host that slows with nothing to show inside the VM.
This catches the opposite: work inside the VM that is not the bench's. On 2026-11-28 a Serve node
left running by an earlier script took about 15% of a core throughout two bench runs. The floor,
measured in process beside it, read low, so every share read high; and the node's replicas
answered one path's requests (mcp_classifier.embedder.ingress_ports has the fix). The per-level
"other" column showed it, but nothing said so. Every bench now samples other processes before its
floor and during each host check, and its last lines warn when any reading passed the threshold.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from .cpu import host_busy_seconds, self_cpu_seconds

# % of one core. An idle embedded Ray node takes about 15 (docs/decisions/0001-benchmark-method-and-noise.md); a quiet
# host reads 0-4 beside a bench.
OTHER_WARNING_PCT = 10.0
IDLE_SAMPLE_S = 1.0


@dataclass(frozen=True)
class LoadMark:
    """The host's busy CPU-seconds and this process's own, at one instant."""

    wall: float
    host: float | None
    own: float

    @classmethod
    def take(cls) -> LoadMark:
        return cls(time.monotonic(), host_busy_seconds(), self_cpu_seconds())

    def other_pct_since(self, start: LoadMark) -> float | None:
        """% of one core that processes other than this one used between ``start`` and this mark."""
        wall = self.wall - start.wall
        if self.host is None or start.host is None or wall <= 0:
            return None
        return max(0.0, 100 * ((self.host - start.host) - (self.own - start.own)) / wall)


def other_load_now(seconds: float = IDLE_SAMPLE_S) -> float | None:
    """Other processes' share of a core over ``seconds`` while this process sleeps (before anything is measured)."""
    start = LoadMark.take()
    time.sleep(seconds)
    return LoadMark.take().other_pct_since(start)


def before_floor_note(pct: float | None) -> str:
    """Printed at once, so a busy host is seen before minutes of measuring rather than after."""
    if pct is None:
        return ""
    note = f"  other processes before the floor: {pct:.0f}% of a core"
    if pct > OTHER_WARNING_PCT:
        note += f" (WARNING: over {OTHER_WARNING_PCT:.0f}%: a server left running? the figures will not be this host's own)"
    return note


def other_load_line(checks: Sequence[tuple[str, float | None]], serving: Sequence[tuple[str, float | None]] = ()) -> str:
    """One line: each check in order, the highest reading while serving, and a warning when any passed the threshold."""
    listed = [(label, pct) for label, pct in checks if pct is not None]
    served = [(label, pct) for label, pct in serving if pct is not None]
    if not listed and not served:
        return ""
    parts = [f"{label} {pct:.0f}" for label, pct in listed]
    if served:
        label, pct = max(served, key=lambda item: item[1])
        parts.append(f"while serving at most {pct:.0f} ({label})")
    line = "other processes on the host (% of one core): " + "; ".join(parts)
    if max(pct for _, pct in [*listed, *served]) > OTHER_WARNING_PCT:
        line += (
            f". WARNING: other processes took over {OTHER_WARNING_PCT:.0f}% of a core (a server left running?): the floor "
            "and the paths shared the host with them, so shares and ratios are not this host's own; find them (ps) and run again"
        )
    return line
