"""Markdown tables of benchmark results."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .floor import RawResult
    from .loadgen import HttpResult


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "—"
    return f"{value:.{digits}f}"


def render_table(raw: list[RawResult], http: list[HttpResult], floor: float) -> str:
    lines = [
        "| run | throughput | p50 ms | p95 / p99 ms | % of raw floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in raw:
        lines.append(f"| {r.name} | {r.texts_per_s:.1f} texts/s | — | — | {100 * r.texts_per_s / floor:.0f}% |")
    for h in http:
        tail = f"{fmt(h.p95_ms)} / {fmt(h.p99_ms)}"
        lines.append(f"| {h.name} | {h.rps:.1f} req/s | {fmt(h.p50_ms)} | {tail} | {100 * h.rps / floor:.0f}% |")
    return "\n".join(lines)


def render_cpu_table(raw: list[RawResult], http: list[HttpResult]) -> str:
    """Who used the cores during each measurement: noisy neighbours explain most odd numbers."""
    lines = [
        "| run | model process CPU % | load generator CPU % | other processes CPU % | ok | failures |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in raw:
        lines.append(f"| {r.name} | {fmt(r.own_cpu_pct, 0)} | — | {fmt(r.other_cpu_pct, 0)} | — | — |")
    for h in http:
        cpu = f"{fmt(h.server_cpu_pct, 0)} | {fmt(h.loadgen_cpu_pct, 0)} | {fmt(h.other_cpu_pct, 0)}"
        lines.append(f"| {h.name} | {cpu} | {h.ok} | {h.failures} |")
    lines.append("")
    lines.append(
        f"(CPU % is of one core; this host has {os.cpu_count()}. Model process = this process for raw rows, the server and all its child processes for HTTP rows; "
        "'other' = host busy time minus both, i.e. other tenants.)"
    )
    return "\n".join(lines)
