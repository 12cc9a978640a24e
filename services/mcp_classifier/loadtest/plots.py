"""PNG plots a capacity planner reads, from the per-step figures in summary.json (and Locust's history CSV).

Every plot draws only what was measured: a run or a request kind without data is said in words on the
figure, never drawn as empty axes, and a run with no measured step gets no capacity plots at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import RunResult

CAPACITY_PLOT = "capacity.png"
KINDS_PLOT = "latency_by_kind.png"
ERRORS_PLOT = "errors_per_step.png"
OVER_TIME_PLOT = "over_time.png"
DPI = 110
PERCENTILE_STYLES = (("p50", "o", ":"), ("p95", "s", "--"), ("p99", "^", "-"))
KIND_TITLES = {"hit": "cache hits (repeated texts)", "miss": "misses (unique texts)", "batch": "classify_batch", "list": "list_categories"}
LOG_TICKS = (1.0, 2.0, 5.0)
MARGIN = 0.08  # share of the data range left around the points, so none sits on the frame


def write_plots(runs: list[RunResult], out: Path) -> list[Path]:
    """Writes the plots that have data and returns their paths. Needs matplotlib; without it, none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: F401 - imported for its side effect on the backend
    except ImportError:
        return []
    measured = [(run, steps) for run in runs if (steps := [s for s in run.summary().get("steps") or [] if s["requests"]])]
    written = []
    if measured:
        written += [capacity_plot(measured, out), kinds_plot(measured, out), errors_plot(measured, out)]
    over_time = over_time_plot(runs, out)
    return written + ([over_time] if over_time else [])


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _log_limits(ax: Any, values: list[float]) -> None:
    """Log-axis limits with a margin around the data: every point stays inside the frame."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    positive = [v for v in values if v and v > 0]
    if positive:
        ax.set_ylim(min(positive) / 1.5, max(positive) * 1.5)
    ax.yaxis.set_major_locator(LogLocator(subs=LOG_TICKS))  # labels inside a decade too, not one lone "1000"
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 100, not 10^2
    ax.yaxis.set_minor_formatter(NullFormatter())


def capacity_plot(measured: list[tuple[RunResult, list[dict[str, Any]]]], out: Path) -> Path:
    """Throughput (x) against p50/p95/p99 (y, log) per step, each point labelled with its users, and the SLO line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    slo = float(measured[0][0].summary()["slo_p99_ms"])
    values: list[float] = [slo]
    xs: list[float] = []
    for index, (run, steps) in enumerate(measured):
        color = f"C{index}"
        for key, marker, line in PERCENTILE_STYLES:
            points = [(s["rps"], s[key]) for s in steps if s[key] is not None]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker, linestyle=line, color=color, label=f"{run.label} {key}")
            values += [p[1] for p in points]
            xs += [p[0] for p in points]
        for s in steps:
            if s["p99"] is not None:
                ax.annotate(f"{s['users']}u", (s["rps"], s["p99"]), textcoords="offset points", xytext=(4, 6), fontsize=7, color=color)
        best = run.summary().get("knee")
        if best:
            ax.scatter([best["rps"]], [best["p99"]], s=160, facecolors="none", edgecolors=color, linewidths=2, zorder=5)
    ax.axhline(slo, color="red", linewidth=1, label=f"SLO p99 {slo:g} ms")
    ax.set_yscale("log")
    _log_limits(ax, values)
    span = (max(xs) - min(xs)) or max(xs) or 1.0
    ax.set_xlim(max(0.0, min(xs) - span * MARGIN), max(xs) + span * MARGIN * 2)
    ax.set_xlabel("throughput per step (requests/s)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title("Capacity: latency against throughput, one point per step (label: users; circle: the knee)")
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, out / CAPACITY_PLOT)


def kinds_plot(measured: list[tuple[RunResult, list[dict[str, Any]]]], out: Path) -> Path:
    """p50 and p99 per step by request kind, log scale, with the request count at each point."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, kind in zip(axes.flat, KIND_TITLES, strict=True):
        values: list[float] = []
        for index, (run, steps) in enumerate(measured):
            rows = [(s["users"], s["kinds"][kind]) for s in steps if kind in s.get("kinds", {}) and s["kinds"][kind]["p99"] is not None]
            if not rows:
                continue
            users = [r[0] for r in rows]
            for key, marker, line in (PERCENTILE_STYLES[0], PERCENTILE_STYLES[2]):
                ys = [r[1][key] for r in rows]
                ax.plot(users, ys, marker=marker, linestyle=line, color=f"C{index}", label=f"{run.label} {key}")
                values += ys
            for u, figures in rows:
                ax.annotate(f"n={figures['requests']}", (u, figures["p99"]), textcoords="offset points", xytext=(3, 5), fontsize=6)
        ax.set_title(KIND_TITLES[kind], fontsize=9)
        if not values:
            ax.axis("off")
            ax.text(0.5, 0.5, f"no {KIND_TITLES[kind]} requests in this run", ha="center", va="center", transform=ax.transAxes)
            continue
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _log_limits(ax, values)
        all_users = sorted({s["users"] for _, steps in measured for s in steps})
        ax.set_xlim(all_users[0] / 1.4, all_users[-1] * 1.4)
        ax.set_xticks(all_users, [str(u) for u in all_users])
        ax.set_xlabel("users (step)")
        ax.set_ylabel("latency (ms, log)")
        ax.legend(fontsize=6)
    fig.suptitle("Latency by request kind per step (n: requests in the step)")
    return _save(fig, out / KINDS_PLOT)


def errors_plot(measured: list[tuple[RunResult, list[dict[str, Any]]]], out: Path) -> Path:
    """Failed requests per step beside the step's requests, so zero failures reads as zero, not as a blank."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(measured)
    labels = sorted({s["users"] for _, steps in measured for s in steps})
    positions = {u: i for i, u in enumerate(labels)}
    for index, (run, steps) in enumerate(measured):
        xs = [positions[s["users"]] + index * width for s in steps]
        ratios = [s["failures"] / s["requests"] for s in steps]
        bars = ax.bar(xs, ratios, width, color=f"C{index}", label=run.label)
        for bar, s in zip(bars, steps, strict=True):
            ax.annotate(f"{s['failures']}/{s['requests']}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)  # fmt: skip
    ax.set_xticks([i + width * (len(measured) - 1) / 2 for i in range(len(labels))], [str(u) for u in labels])
    ax.set_ylim(0, 1.15)
    ax.set_xlabel("users (step)")
    ax.set_ylabel("failed share of the step's requests")
    ax.set_title("Errors per step (label: failed/requests)")
    ax.legend(fontsize=8)
    return _save(fig, out / ERRORS_PLOT)


def over_time_plot(runs: list[RunResult], out: Path) -> Path | None:
    """Locust's history over time (10 s moving windows): how load and latency moved; None when it has no rows."""
    import matplotlib.pyplot as plt

    series = [(run, rows) for run in runs if (rows := [r for r in run.history() if r["50%"] not in ("", "N/A") and r["User Count"] != "0"])]
    if not series:
        return None
    fig, (latency_ax, rps_ax) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    values: list[float] = []
    for index, (run, rows) in enumerate(series):
        t0 = int(rows[0]["Timestamp"])
        seconds = [int(r["Timestamp"]) - t0 for r in rows]
        for column, (_, _, line) in zip(("50%", "95%", "99%"), PERCENTILE_STYLES, strict=True):
            ys = [float(r[column]) for r in rows]
            latency_ax.plot(seconds, ys, line, color=f"C{index}", label=f"{run.label} p{column[:-1]}")
            values += ys
        rps_ax.plot(seconds, [float(r["Requests/s"]) for r in rows], color=f"C{index}", label=f"{run.label} req/s")
        rps_ax.plot(seconds, [int(r["User Count"]) for r in rows], color=f"C{index}", alpha=0.4, linestyle="--", label=f"{run.label} users")
    latency_ax.set_yscale("log")
    _log_limits(latency_ax, values)
    latency_ax.set_ylabel("latency (ms, log)")
    latency_ax.set_title("Over time (Locust's history: 10 s moving windows; the steps' own figures are above)")
    latency_ax.legend(fontsize=7)
    rps_ax.set_ylabel("requests/s, and users (dashed)")
    rps_ax.set_xlabel("seconds since the first request")
    rps_ax.legend(fontsize=7, loc="upper left")
    return _save(fig, out / OVER_TIME_PLOT)
