"""report.md and PNG plots from Locust's own output files; nothing here recomputes a figure.

Counts (requests, failures) come from Locust's JSON (`stats.json`, exact at the end of the run);
latency percentiles, averages and req/s from Locust's own summary of the same final stats
(`summary.json`, written by the locustfile from `environment.stats`); time series from Locust's
history CSV. Locust's own HTML report sits beside them.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LATENCY_PLOT = "latency_throughput.png"
HIT_MISS_PLOT = "hit_vs_miss.png"


@dataclass(frozen=True)
class RunResult:
    label: str
    host: str
    out: Path
    locust_exit_code: int

    def stats(self) -> list[dict[str, Any]]:
        """Locust's JSON: one entry per request name (Locust writes no aggregate row there)."""
        return list(json.loads((self.out / "stats.json").read_text()))

    def summary(self) -> dict[str, Any]:
        path = self.out / "summary.json"
        return json.loads(path.read_text()) if path.exists() else {"entries": [], "total": {}}

    def history(self) -> list[dict[str, str]]:
        path = self.out / "locust_stats_history.csv"
        if not path.exists():
            return []
        with path.open(newline="") as file:
            return [row for row in csv.DictReader(file) if row.get("Name") == "Aggregated"]


def _ms(value: Any) -> str:
    return "—" if value in (None, "") else f"{float(value):.0f}"


def run_table(run: RunResult) -> list[str]:
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


def write_report(runs: list[RunResult], out: Path) -> Path:
    lines = ["# Load test", ""]
    for run in runs:
        requests, failures = totals(run)
        lines += [
            f"## {run.label}",
            "",
            f"Target `{run.host}`: **{requests} requests, {failures} failed** "
            f"(Locust exit code {run.locust_exit_code}). Locust's files in `{run.out}`: `stats.json` (its JSON: the counts "
            "here), `locust_stats.csv`, `locust_stats_history.csv`, `report.html`; `summary.json` holds its final "
            "percentiles and rates.",
            "",
            *run_table(run),
            "",
        ]
    plots = write_plots(runs, out)
    if plots:
        lines += ["## Plots", "", *[f"![{p.stem}]({p.name})" for p in plots], ""]
    if len(runs) > 1:
        lines += [
            "## Side by side",
            "",
            "| target | requests | failures | req/s | p50 ms | p95 ms | p99 ms |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for run in runs:
            requests, failures = totals(run)
            t = run.summary()["total"]
            lines.append(
                f"| {run.label} | {requests} | {failures} | {float(t.get('total_rps', 0)):.1f} | {_ms(t.get('p50'))} "
                f"| {_ms(t.get('p95'))} | {_ms(t.get('p99'))} |"
            )
        lines.append("")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_plots(runs: list[RunResult], out: Path) -> list[Path]:
    """Latency percentiles and throughput over time; cache-hit against miss latency. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    fig, (latency_ax, rps_ax) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for run in runs:
        history = [row for row in run.history() if row["50%"] not in ("", "N/A") and row["User Count"] != "0"]
        if not history:
            continue
        t0 = int(history[0]["Timestamp"])
        seconds = [int(row["Timestamp"]) - t0 for row in history]
        for column, style in (("50%", "-"), ("95%", "--"), ("99%", ":")):
            latency_ax.plot(seconds, [float(row[column]) for row in history], style, label=f"{run.label} p{column[:-1]}")
        rps_ax.plot(seconds, [float(row["Requests/s"]) for row in history], label=f"{run.label} req/s")
        users_ax = rps_ax.twinx()
        users = [int(row["User Count"]) for row in history]
        users_ax.plot(seconds, users, color="grey", alpha=0.4, label="users")
        users_ax.set_ylim(0, max(users) * 1.25)
        users_ax.set_ylabel("users (grey)")
    latency_ax.set_ylabel("latency (ms)")
    latency_ax.set_title("Latency percentiles and throughput over time (Locust's history: 10 s moving windows)")
    latency_ax.legend(fontsize=8)
    rps_ax.set_ylabel("requests/s")
    rps_ax.set_xlabel("seconds since start")
    rps_ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    written.append(out / LATENCY_PLOT)
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    groups: dict[str, dict[str, Any]] = {}
    for run in runs:
        for entry in run.summary()["entries"]:
            for kind in ("repeat", "unique"):
                if f"({kind})" in entry["name"] and entry["num_requests"]:
                    groups[f"{run.label}\n{entry['name']}"] = entry
    groups = dict(sorted(groups.items(), key=lambda item: ("(unique)" in item[0], item[0])))
    if groups:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        names = list(groups)
        width = 0.25
        for i, q in enumerate(("p50", "p95", "p99")):
            ax.bar([x + i * width for x in range(len(names))], [float(groups[n][q] or 0) for n in names], width, label=q)
        ax.set_xticks([x + width for x in range(len(names))], names, fontsize=7)
        ax.set_ylabel("latency (ms)")
        ax.set_title("Cache hits (repeated texts) against misses (unique texts)")
        ax.legend()
        fig.tight_layout()
        written.append(out / HIT_MISS_PLOT)
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    return written
