"""report.md from Locust's own output files; nothing here recomputes a figure.

Per-step figures, the knee, the warm-up and the failures' reasons come from `summary.json`, written by the
locustfile from Locust's own stats; whole-run counts from Locust's JSON (`stats.json`). The report also records every
setting of the run, the target's /health and the versions, so that a figure can be traced to what made it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .plots import write_plots
from .target import versions


@dataclass(frozen=True)
class RunResult:
    label: str
    host: str
    out: Path
    locust_exit_code: int
    health: dict[str, Any] = field(default_factory=dict)

    def stats(self) -> list[dict[str, Any]]:
        """Locust's JSON: one entry per request name (Locust writes no aggregate row there)."""
        return list(json.loads((self.out / "stats.json").read_text()))

    def summary(self) -> dict[str, Any]:
        path = self.out / "summary.json"
        return json.loads(path.read_text()) if path.exists() else {"entries": [], "total": {}, "steps": []}

    def history(self) -> list[dict[str, str]]:
        path = self.out / "locust_stats_history.csv"
        if not path.exists():
            return []
        with path.open(newline="") as file:
            return [row for row in csv.DictReader(file) if row.get("Name") == "Aggregated"]


@dataclass(frozen=True)
class FailureReason:
    """Failures of one kind: how many, one reason as a check worded it, and the request names that had it."""

    count: int
    example: str
    names: tuple[str, ...]

    def line(self) -> str:
        example = self.example[:REASON_CHARS].replace("`", "'")  # inside a code span
        return f"{self.count} × `{example}` ({', '.join(self.names)})"


REASONS_IN_RESULT = 3
REASON_CHARS = 300
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


def failure_reasons(run: RunResult) -> list[FailureReason]:
    """Locust's failures grouped by reason, the most common first. Numbers are left out of the grouping: one
    wrong kind of answer gives a different confidence, probability or text counter in every request."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in run.summary().get("failures") or []:
        groups.setdefault(_NUMBER.sub("#", str(row["error"])), []).append(row)
    reasons = [
        FailureReason(
            count=sum(int(row["occurrences"]) for row in rows),
            example=str(max(rows, key=lambda row: int(row["occurrences"]))["error"]),
            names=tuple(sorted({str(row["name"]) for row in rows})),
        )
        for rows in groups.values()
    ]
    return sorted(reasons, key=lambda reason: -reason.count)


def failure_lines(run: RunResult) -> list[str]:
    """The run's failures by reason, for its own section; nothing when no request failed."""
    reasons = failure_reasons(run)
    if not reasons:
        return []
    return [
        "Failures by reason (Locust's counts over the whole run, the most common first; one example of each, whose numbers "
        "vary between requests):",
        "",
        *[f"- {reason.line()}" for reason in reasons],
        "",
    ]


def _ms(value: Any) -> str:
    return "—" if value in (None, "") else f"{float(value):.0f}"


def run_table(run: RunResult) -> list[str]:
    """Whole run by request name, from Locust's final stats (every step together)."""
    figures = {(e["method"], e["name"]): e for e in run.summary()["entries"]}
    lines = [
        "| request | requests | failures | req/s | p50 ms | p95 ms | p99 ms | avg ms | max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total_requests = total_failures = 0
    for entry in sorted(run.stats(), key=lambda e: e["name"]):
        f = figures.get((entry["method"], entry["name"]), {})
        total_requests += entry["num_requests"]
        total_failures += entry["num_failures"]
        lines.append(
            f"| {entry['name']} | {entry['num_requests']} | {entry['num_failures']} | {float(f.get('total_rps', 0)):.1f} "
            f"| {_ms(f.get('p50'))} | {_ms(f.get('p95'))} | {_ms(f.get('p99'))} | {_ms(f.get('avg_response_time'))} "
            f"| {_ms(entry['max_response_time'])} |"
        )
    total = run.summary()["total"]
    lines.append(
        f"| **total** | **{total_requests}** | **{total_failures}** | {float(total.get('total_rps', 0)):.1f} "
        f"| {_ms(total.get('p50'))} | {_ms(total.get('p95'))} | {_ms(total.get('p99'))} | {_ms(total.get('avg_response_time'))} "
        f"| {_ms(total.get('max_response_time'))} |"
    )
    return lines


def totals(run: RunResult) -> tuple[int, int]:
    """(requests, failures) over the whole run, as Locust's JSON counts them."""
    stats = run.stats()
    return sum(e["num_requests"] for e in stats), sum(e["num_failures"] for e in stats)


def _kind(step: dict[str, Any], kind: str, figure: str) -> str:
    value = step.get("kinds", {}).get(kind, {}).get(figure)
    if value is None:
        return "—"
    return f"{value:.1f}" if figure == "rps" else f"{value:.0f}"


def headline(run: RunResult) -> str:
    """One sentence a planner reads first: the highest throughput whose p99 stays within the SLO."""
    summary = run.summary()
    slo = summary.get("slo_p99_ms")
    best = summary.get("knee")
    steps = summary.get("steps") or []
    if not steps:
        return f"**{run.label}**: no per-step figures (the stages shape measures the run as a whole; see the table below)."
    peak = max(steps, key=lambda s: s["rps"])
    if best is None:
        lowest = steps[0]
        return (
            f"**{run.label}**: no step kept p99 within {slo:g} ms without failures "
            f"(the first step, users {lowest['users']}: p99 {_ms(lowest['p99'])} ms, {lowest['failures']} failed). "
            f"Throughput peaked at {peak['rps']:.1f} req/s ({peak['users']} users, p99 {_ms(peak['p99'])} ms)."
        )
    hit, miss = best["kinds"].get("hit"), best["kinds"].get("miss")
    parts = [f"cache hits {hit['rps']:.1f} req/s, p99 {_ms(hit['p99'])} ms" if hit else "no cache hits"]
    parts.append(f"misses {miss['rps']:.1f} req/s, p99 {_ms(miss['p99'])} ms" if miss else "no misses")
    beyond = (
        ""
        if peak is best
        else f" Throughput peaked at {peak['rps']:.1f} req/s ({peak['users']} users, p99 {_ms(peak['p99'])} ms), over the SLO."
    )
    return (
        f"**{run.label}: {best['rps']:.1f} req/s at {best['users']} users within p99 ≤ {slo:g} ms** "
        f"(p99 {_ms(best['p99'])} ms; {'; '.join(parts)}).{beyond}"
    )


def step_table(run: RunResult) -> list[str]:
    lines = [
        "| users | s | requests | failed | req/s | p50 ms | p95 ms | p99 ms | hit req/s | hit p99 | miss req/s | miss p99 "
        "| batch p99 | list p99 | within SLO |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in run.summary().get("steps") or []:
        within = "yes" if s["within_slo"] else "no"
        lines.append(
            f"| {s['users']} | {s['seconds']:.0f} | {s['requests']} | {s['failures']} | {s['rps']:.1f} | {_ms(s['p50'])} "
            f"| {_ms(s['p95'])} | {_ms(s['p99'])} | {_kind(s, 'hit', 'rps')} | {_kind(s, 'hit', 'p99')} "
            f"| {_kind(s, 'miss', 'rps')} | {_kind(s, 'miss', 'p99')} | {_kind(s, 'batch', 'p99')} | {_kind(s, 'list', 'p99')} "
            f"| {within if s.get('complete', True) else within + ' (cut short)'} |"
        )
    return lines


def warm_up_line(run: RunResult) -> str:
    warm_up = run.summary().get("warm_up") or {}
    if not warm_up.get("texts"):
        return "No warm-up (hit ratio 0)."
    if warm_up.get("failed"):
        return f"Warm-up failed: {warm_up['failed']}."
    return f"Warm-up: {warm_up['done']} requests in {warm_up['seconds']:.1f} s (budget {warm_up['timeout_s']:g} s), before the first step, not measured."


HEALTH_KEYS = ("status", "model", "device", "dtype", "pooling", "scoring", "backend", "replicas", "batch", "cache", "redis")


def health_lines(run: RunResult) -> list[str]:
    """The fields a capacity figure depends on, then the whole /health answer."""
    health = run.health
    lines = [f"### {run.label} `/health`", ""]
    shown = {key: health[key] for key in health if key in HEALTH_KEYS or any(word in key for word in ("batch", "cache", "replica"))}
    if "error" in health:
        shown["error"] = health["error"]
    lines += ["| field | value |", "|---|---|", *[f"| {k} | `{json.dumps(v)[:300]}` |" for k, v in shown.items()], ""]
    lines += ["<details><summary>full /health</summary>", "", "```json", json.dumps(health, indent=2), "```", "", "</details>", ""]
    return lines


def write_report(runs: list[RunResult], settings: dict[str, Any], problems: list[str], out: Path) -> Path:
    lines = ["# Load test", ""]
    if problems:
        lines += ["**Result: FAILED**", "", *[f"- {p}" for p in problems], ""]
        why = [(run, reason) for run in runs for reason in failure_reasons(run)[:REASONS_IN_RESULT]]
        if why:
            lines += ["Why requests failed (the most common reasons, over the whole run; each run's section lists them all):", ""]
            lines += [f"- {run.label}: {reason.line()}" for run, reason in why] + [""]
    else:
        lines += [f"**Result: passed**: requests were measured, failures within --max-failure-ratio {settings['max_failure_ratio']:g}.", ""]
    lines += ["## Capacity", "", *[f"- {headline(run)}" for run in runs], ""]
    for run in runs:
        requests, failures = totals(run)
        lines += [
            f"## {run.label}",
            "",
            f"Target `{run.host}`. {warm_up_line(run)}",
            "",
            "Each step holds its user count for a fixed time and is measured on its own (Locust's cumulative stats at "
            "the step's start and end; percentiles by Locust's own function over the difference).",
            "",
            *step_table(run),
            "",
            f"Whole run by request name (Locust's final stats, every step together): **{requests} requests, {failures} failed** "
            f"(Locust exit code {run.locust_exit_code}). Locust's files in `{run.out}`.",
            "",
            *run_table(run),
            "",
            *failure_lines(run),
        ]
    plots = write_plots(runs, out)
    if plots:
        lines += ["## Plots", "", *[f"![{p.stem}]({p.name})" for p in plots], ""]
    lines += ["## Settings", "", "| setting | value |", "|---|---|", *[f"| {k} | `{v}` |" for k, v in settings.items()], ""]
    lines += ["## Target", ""]
    for run in runs:
        lines += health_lines(run)
    lines += ["## Versions", "", "| package | version |", "|---|---|", *[f"| {k} | {v} |" for k, v in versions().items()], ""]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
