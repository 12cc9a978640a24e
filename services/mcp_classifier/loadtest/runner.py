"""`mcp-classifier loadtest`: Locust, headless, against a URL or a local stack it starts, then a report.

Locust runs in its own process (`python -m locust`): it monkey-patches the interpreter with gevent,
which must never happen inside the gateway's package code. The figures in the report are Locust's:
the locustfile's step shape measures each step from Locust's own stats and writes them to summary.json.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .report import REASONS_IN_RESULT, RunResult, failure_reasons, write_report
from .stack import GatewayProcess, start_gateway
from .target import describe_target
from .verdict import verdict

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
PROGRESS_EVERY_S = 2.0
STOP_TIMEOUT_S = 10  # users finish the request in hand before Locust stops
LOCUST_OVERRUN_S = 120  # start-up and shutdown beyond warm-up and steps before the run counts as hung


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
    shape: str  # "constant" (users for duration_s: one step), "steps" (the steps below) or "stages"
    processes: int  # Locust worker processes (1: one process; more for load beyond one core)
    steps: tuple[int, ...] = ()
    step_duration_s: int = 20
    slo_p99_ms: float = 100.0
    max_failure_ratio: float = 0.0
    warmup_timeout_s: float = 120.0

    @property
    def measured_steps(self) -> tuple[int, ...]:
        """The user counts measured one after another: a constant run is one step of --users."""
        if self.shape == "stages":
            return ()
        return self.steps or (self.users,)

    @property
    def step_seconds(self) -> int:
        return self.step_duration_s if self.steps else self.duration_s

    @property
    def measured_seconds(self) -> int:
        return self.duration_s if self.shape == "stages" else self.step_seconds * len(self.measured_steps)


def locust_command(options: LoadtestOptions, host: str, out: Path, user_classes: list[str]) -> list[str]:
    """Headless Locust; the locustfile's shape sets the users and the length, so no -u/-r/-t here."""
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", host,
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
        "MCP_LOADTEST_SLO_P99_MS": str(options.slo_p99_ms),
        "MCP_LOADTEST_MAX_FAILURE_RATIO": str(options.max_failure_ratio),
        "MCP_LOADTEST_WARMUP_TIMEOUT_S": str(options.warmup_timeout_s),
    }
    if options.shape == "stages":
        env["MCP_LOADTEST_SHAPE"] = "stages"
    else:
        env["MCP_LOADTEST_SHAPE"] = "steps"
        env["MCP_LOADTEST_STEPS"] = ",".join(map(str, options.measured_steps))
        env["MCP_LOADTEST_STEP_S"] = str(options.step_seconds)
        env["MCP_LOADTEST_SPAWN_RATE"] = "0" if options.steps else str(options.spawn_rate)
    if options.api_key:
        env["MCP_LOADTEST_API_KEY"] = options.api_key
    return env


class _LogFollower:
    """Echoes the locustfile's own "[loadtest]" lines (warm-up, steps, capacity) from Locust's log as they come."""

    def __init__(self, path: Path, label: str) -> None:
        self.path, self.label, self.offset = path, label, 0

    def follow(self) -> None:
        try:
            with self.path.open("rb") as file:
                file.seek(self.offset)
                chunk = file.read()
        except OSError:
            return
        complete = chunk.rfind(b"\n") + 1
        self.offset += complete
        for line in chunk[:complete].decode(errors="replace").splitlines():
            if line.startswith("[loadtest] "):
                print(f"[loadtest] {self.label}: {line.removeprefix('[loadtest] ')}", file=sys.stderr, flush=True)


def run_locust(options: LoadtestOptions, host: str, out: Path, label: str, user_classes: list[str]) -> RunResult:
    """Run Locust to the end, echoing its step lines; its files land in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    steps = ",".join(map(str, options.measured_steps)) or f"stages of {options.users}"
    print(f"[loadtest] {label}: users {steps}, {options.measured_seconds} s measured, against {host}", file=sys.stderr, flush=True)
    health = describe_target(host, options.api_key)
    limit_s = options.warmup_timeout_s + options.measured_seconds + LOCUST_OVERRUN_S
    follower = _LogFollower(out / "locust.log", label)
    with (out / "locust.log").open("wb") as log:
        process = subprocess.Popen(locust_command(options, host, out, user_classes), stdout=log, stderr=subprocess.STDOUT,
                                   env={**locust_env(options, out), "PYTHONUNBUFFERED": "1"})  # fmt: skip
        started = time.monotonic()
        while process.poll() is None:
            time.sleep(PROGRESS_EVERY_S)
            follower.follow()
            if time.monotonic() - started > limit_s:
                process.kill()
                process.wait()
                raise RuntimeError(f"Locust ran past {limit_s:g} s (warm-up budget, steps and {LOCUST_OVERRUN_S} s): stopped")
    follower.follow()
    if not (out / "stats.json").exists() or not (out / "summary.json").exists():
        raise RuntimeError(f"Locust exited with {process.returncode} and wrote no statistics:\n{(out / 'locust.log').read_text()[-3000:]}")
    return RunResult(label=label, host=host, out=out, locust_exit_code=process.returncode, health=health)


def settings_of(options: LoadtestOptions, url: str) -> dict[str, Any]:
    """Every setting of the run, for the report; the API key only as whether one was set."""
    settings: dict[str, Any] = {"target": url if options.url else f"local stack ({url}, serve --backend {options.backend})"}
    settings |= {k: v for k, v in asdict(options).items() if k not in ("url", "api_key", "out")}
    settings |= {"measured steps (users)": ",".join(map(str, options.measured_steps)) or "stages",
                 "seconds per step": options.step_seconds, "api key": "set" if options.api_key else "none"}  # fmt: skip
    return settings


def run_loadtest(options: LoadtestOptions) -> int:
    """Returns the exit code: 0 only when requests were measured and failures stayed within the allowed ratio."""
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
    problems = [f"{run.label}: {problem}" for run in runs if (problem := verdict(run.summary(), options.max_failure_ratio))]
    report = write_report(runs, settings_of(options, url), problems, options.out)
    print(report.read_text(), flush=True)
    print(f"[loadtest] report: {report}", file=sys.stderr)
    for problem in problems:
        print(f"mcp-classifier loadtest: FAILED: {problem}", file=sys.stderr)
    if problems:  # the reasons, not only in Locust's CSV: the report lists every one
        for run in runs:
            for reason in failure_reasons(run)[:REASONS_IN_RESULT]:
                print(f"mcp-classifier loadtest: failed because: {run.label}: {reason.line()}", file=sys.stderr)
    return 1 if problems else 0
