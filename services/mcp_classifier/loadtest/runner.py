"""`mcp-classifier loadtest`: Locust, headless, against a URL or a local stack it starts, then a report.

Locust runs in its own process (`python -m locust`): it monkey-patches the interpreter with gevent,
which must never happen inside the gateway's package code. The figures in the report are Locust's.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .report import RunResult, write_report
from .stack import GatewayProcess, start_gateway

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
PROGRESS_EVERY_S = 2.0
STOP_TIMEOUT_S = 10  # users finish the request in hand before Locust stops


@dataclass(frozen=True)
class LoadtestOptions:
    url: str | None
    backend: str
    users: int
    spawn_rate: float
    duration_s: int
    hit_ratio: float
    probabilities_ratio: float
    length_mix: str
    api_key: str | None
    out: Path
    compare: str | None
    shape: str  # "constant" (-u/-r/-t) or "stages" (ramp, plateau, spike)
    processes: int  # Locust worker processes (1: one process; more for load beyond one core)


def locust_command(options: LoadtestOptions, host: str, out: Path, user_classes: list[str]) -> list[str]:
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host,
        "-u", str(options.users), "-r", str(options.spawn_rate), "-t", f"{options.duration_s}s",
        "--json-file", str(out / "stats"),  # Locust appends .json
        "--csv", str(out / "locust"), "--csv-full-history", "--html", str(out / "report.html"),
        "--only-summary", "--stop-timeout", str(STOP_TIMEOUT_S), "--loglevel", "WARNING",
    ]  # fmt: skip
    if options.processes > 1:
        command += ["--processes", str(options.processes)]
    command += user_classes
    if user_classes:  # --compare: the workload every MCP classifier can answer (classify_batch is ours)
        command += ["--exclude-tags", "batch"]  # last: the option takes every word after it
    return command


def locust_env(options: LoadtestOptions, out: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "MCP_LOADTEST_HIT_RATIO": str(options.hit_ratio),
        "MCP_LOADTEST_PROBABILITIES_RATIO": str(options.probabilities_ratio),
        "MCP_LOADTEST_LENGTH_MIX": options.length_mix,
        "MCP_LOADTEST_SUMMARY_FILE": str(out / "summary.json"),
        "MCP_LOADTEST_USERS": str(options.users),
        "MCP_LOADTEST_DURATION_S": str(options.duration_s),
    }
    if options.shape == "stages":
        env["MCP_LOADTEST_SHAPE"] = "stages"
    if options.api_key:
        env["MCP_LOADTEST_API_KEY"] = options.api_key
    return env


def _latest_progress(history: Path) -> str | None:
    """One line from the last aggregated row Locust wrote to its history CSV."""
    try:
        with history.open(newline="") as file:
            rows = [row for row in csv.DictReader(file) if row.get("Name") == "Aggregated"]
    except OSError:
        return None
    if not rows:
        return None
    row = rows[-1]
    if row["User Count"] == "0" and row["Total Request Count"] == "0":
        return "warming the cache with the repeated texts (not timed)"
    return (
        f"users {row['User Count']:>4} | {float(row['Requests/s']):7.1f} req/s | p50 {row['50%']} ms p95 {row['95%']} ms "
        f"| requests {row['Total Request Count']} failures {row['Total Failure Count']}"
    )


def run_locust(options: LoadtestOptions, host: str, out: Path, label: str, user_classes: list[str]) -> RunResult:
    """Run Locust to the end, printing a progress line every few seconds; its files land in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    print(f"[loadtest] {label}: {options.users} users, {options.duration_s} s against {host}", file=sys.stderr, flush=True)
    with (out / "locust.log").open("wb") as log:
        process = subprocess.Popen(locust_command(options, host, out, user_classes), stdout=log, stderr=subprocess.STDOUT,
                                   env=locust_env(options, out))  # fmt: skip
        started = time.monotonic()
        while process.poll() is None:
            time.sleep(PROGRESS_EVERY_S)
            line = _latest_progress(out / "locust_stats_history.csv")
            if line:
                elapsed = min(time.monotonic() - started, options.duration_s)
                print(f"[loadtest] {label} {elapsed:4.0f}/{options.duration_s} s | {line}", file=sys.stderr, flush=True)
    if not (out / "stats.json").exists():
        raise RuntimeError(f"Locust exited with {process.returncode} and wrote no statistics:\n{(out / 'locust.log').read_text()[-3000:]}")
    return RunResult(label=label, host=host, out=out, locust_exit_code=process.returncode)


def run_loadtest(options: LoadtestOptions) -> int:
    """Returns the exit code: 0 when every request succeeded and every answer was valid."""
    if importlib.util.find_spec("locust") is None:
        raise RuntimeError("Locust is not installed: pip install 'mcp-classifier[loadtest]'")
    options.out.mkdir(parents=True, exist_ok=True)
    stack: GatewayProcess | None = None
    url = options.url
    if url is None:
        print(f"[loadtest] starting the local stack (serve --backend {options.backend})", file=sys.stderr, flush=True)
        stack = start_gateway(options.out / "server.log", "--backend", options.backend)
        url = stack.url
    # --compare: both sides get the same REST-style workload, the one style every MCP classifier speaks.
    user_classes = ["RestUser"] if options.compare else []
    try:
        runs = [run_locust(options, url, options.out, "mcp-classifier" if stack or not options.compare else url, user_classes)]
        if options.compare:
            runs.append(run_locust(options, options.compare, options.out / "compare", options.compare, user_classes))
    finally:
        if stack is not None:
            stack.stop()
    report = write_report(runs, options.out)
    print(report.read_text(), flush=True)
    print(f"[loadtest] report: {report}", file=sys.stderr)
    return 0 if all(run.locust_exit_code == 0 for run in runs) else 1
