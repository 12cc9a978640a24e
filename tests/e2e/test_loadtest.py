"""`mcp-classifier loadtest`: real Locust processes against a real local stack, a broken server and a slow one.

A run that measured nothing, or whose requests failed, must exit non-zero and say why, in report.md too; a
capacity run must leave a headline, a per-step table, the run's settings, the target's /health and plots. The
local stack is started once for the module, by one stepped run whose output every test below reads. A user's
own categories file, with out-of-scope detection on, gets its own server: its right answers must pass.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_classifier.loadtest.plots import CAPACITY_PLOT, ERRORS_PLOT, KINDS_PLOT
from tests.support.processes import ServerProcess, start_server

LOCUST_FILES = ["stats.json", "summary.json", "locust_stats.csv", "locust_stats_history.csv", "report.html", "report.md"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STEPS = (1, 2)
STEP_S = 3
SLOW_ANSWER_S = 0.5  # each answer of the slow server: far more than its warm-up budget allows for 100 texts
WARMUP_BUDGET_S = 1
# A user's file: out-of-scope detection is on (the default for any file but the packaged one), and the locustfile's
# mixed queries fall in scope, near its edge, or out of it.
OWN_CATEGORIES = """
categories:
  - name: math
    description: "Arithmetic, algebra, calculus, equations, primes and geometry."
    examples: ["what is 12 times 14", "solve 2x + 3 = 11", "what is the derivative of x squared", "is 51 a prime number",
               "explain the quadratic formula"]
  - name: programming
    description: "Writing code, data structures, operating systems, networks and servers."
    examples: ["how do I sort a list in python", "what is a hash table", "explain threads versus processes",
               "how does a TCP handshake work", "set up a reverse proxy with nginx"]
  - name: history
    description: "Past events, empires, wars, revolutions and historical people."
    examples: ["why did the Roman Empire fall", "who was Napoleon", "when did the First World War start",
               "what caused the French Revolution", "what was the Cold War"]
out_of_scope_examples: ["what should I cook for dinner", "tell me a joke"]
"""
# Queries of the locustfile's own set: some in scope with P(in scope) well under 1, some out of scope.
EDGE_QUERIES = ["what is a mutex", "define entropy", "who was cleopatra", "what is dns", "good morning", "thanks a lot"]


def loadtest(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "loadtest", *args], capture_output=True, text=True, timeout=timeout_s
    )


def report_totals(report: str) -> list[tuple[int, int]]:
    """(requests, failures) of every '**total**' row of report.md."""
    return [(int(a), int(b)) for a, b in re.findall(r"\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", report)]


@dataclass(frozen=True)
class Run:
    done: subprocess.CompletedProcess[str]
    out: Path

    @property
    def report(self) -> str:
        return (self.out / "report.md").read_text()

    @property
    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())


@pytest.fixture(scope="module")
def steps_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One short stepped run against a local stack the runner starts and stops (half the requests cache hits)."""
    out = tmp_path_factory.mktemp("steps") / "out"
    done = loadtest(
        "--backend", "local", "--steps", ",".join(map(str, STEPS)), "--step-duration", str(STEP_S), "--hit-ratio", "0.5",
        "--slo-p99-ms", "250", "--out", str(out),
    )  # fmt: skip
    return Run(done, out)


def test_a_stepped_run_measures_each_step_and_passes(steps_run: Run) -> None:
    assert steps_run.done.returncode == 0, steps_run.done.stderr[-3000:]
    for name in LOCUST_FILES:
        assert (steps_run.out / name).stat().st_size > 0, name
    steps = steps_run.summary["steps"]
    assert [s["users"] for s in steps] == list(STEPS)
    # How much each step did depends on the host; that each step measured answered requests of its own does not.
    assert all(s["requests"] > 0 and s["failures"] == 0 and s["seconds"] > 0 for s in steps), steps
    assert sum(s["requests"] for s in steps) <= sum(e["num_requests"] for e in json.loads((steps_run.out / "stats.json").read_text()))
    assert {"hit", "miss"} <= set(steps[-1]["kinds"]), steps[-1]["kinds"]  # hits and misses measured apart
    warm_up = steps_run.summary["warm_up"]
    assert warm_up["done"] == warm_up["texts"] > 0 and warm_up["failed"] is None  # warmed up apart, in full
    assert re.search(r"\[loadtest\] mcp-classifier: step 2/2 users 2 \|", steps_run.done.stderr), steps_run.done.stderr[-2000:]
    assert "locust" not in (steps_run.out / "server.log").read_text().lower()  # the stack was ours, and it was stopped


def test_the_report_has_a_headline_a_step_table_and_plots(steps_run: Run) -> None:
    report = steps_run.report
    assert "**Result: passed**" in report and "## Capacity" in report
    knee = steps_run.summary["knee"]
    if knee is None:  # a slow host may put every step over the SLO: the headline must say so
        assert "no step kept p99 within 250 ms" in report
    else:
        assert re.search(rf"req/s at {knee['users']} users within p99 ≤ 250 ms\*\*", report), report[:2000]
        assert "cache hits" in report and "misses" in report
    table = [line for line in report.splitlines() if re.match(r"\| \d+ \| \d+ \| \d+ \| 0 \|", line)]
    assert [int(line.split("|")[1]) for line in table] == list(STEPS), report
    assert len(report_totals(report)) == 1  # the whole-run table per request name is still there
    for plot in (CAPACITY_PLOT, KINDS_PLOT, ERRORS_PLOT):
        assert (steps_run.out / plot).read_bytes()[:8] == PNG_MAGIC, plot
        assert f"]({plot})" in report


def test_the_report_records_settings_health_and_versions(steps_run: Run) -> None:
    report = steps_run.report
    for setting in ("| steps | `(1, 2)` |", "| step_duration_s | `3` |", "| hit_ratio | `0.5` |", "| slo_p99_ms | `250.0` |",
                    "| length_mix |", "| backend | `local` |", "| max_failure_ratio | `0.0` |", "| api key | `none` |"):  # fmt: skip
        assert setting in report, setting
    assert "| target | `local stack (http://127.0.0.1:" in report
    health = re.search(r"```json\n(.*?)\n```", report, re.S)
    assert health and json.loads(health.group(1))["status"] == "ok"
    assert "| model |" in report and "| device |" in report
    assert re.search(r"\| locust \| \d+\.\d+", report) and "| python |" in report and "| mcp-classifier |" in report


@pytest.fixture(scope="module")
def own_file_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("own-file")
    categories = folder / "categories.yaml"
    categories.write_text(OWN_CATEGORIES)
    server = start_server(folder, "--categories-file", str(categories))
    yield server
    server.stop()


def test_right_answers_from_a_file_with_out_of_scope_detection_pass(tmp_path: Path, own_file_server: ServerProcess) -> None:
    out = tmp_path / "own-file"
    done = loadtest(
        "--url", own_file_server.url, "--steps", "1", "--step-duration", str(STEP_S), "--probabilities-ratio", "1",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (step,) = json.loads((out / "summary.json").read_text())["steps"]
    assert step["requests"] > 0 and step["failures"] == 0, step
    report = (out / "report.md").read_text()
    assert "**Result: passed**" in report and "Failures by reason" not in report
    # What the run had to accept: answers in scope whose confidence is the top probability times a P(in scope) well
    # under 1 (the old 0.9 x rule failed them), and answers out of scope.
    body = {"name": "classify_batch", "arguments": {"texts": EDGE_QUERIES, "with_probabilities": True}}
    answers = httpx.post(f"{own_file_server.url}/mcp/tools/call", json=body, timeout=120).json()["structuredContent"]["results"]
    assert any(a["in_scope"] and a["confidence"] < 0.9 * max(a["probabilities"]) for a in answers), answers
    assert any(not a["in_scope"] for a in answers), answers


class _BrokenClassifier(BaseHTTPRequestHandler):
    """A REST-style MCP classifier whose probabilities sum to 1.5: every classify answer is invalid."""

    delay_s = 0.0

    def do_POST(self) -> None:
        time.sleep(self.delay_s)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("name", body.get("params", {}).get("name")) == "list_categories":
            payload: dict[str, Any] = {"categories": ["a", "b"], "category_system_prompts": {}, "category_descriptions": {}}
        else:
            payload = {"class": 0, "confidence": 0.75, "model": "m", "use_reasoning": False, "probabilities": [0.75, 0.75], "entropy": 0.5}
        answer = json.dumps({"content": [{"type": "text", "text": json.dumps(payload)}], "isError": False, "structuredContent": payload})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def do_GET(self) -> None:  # /health: this server has none worth reading
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


class _SlowClassifier(_BrokenClassifier):
    delay_s = SLOW_ANSWER_S


def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def broken_server() -> Iterator[str]:
    yield from _serve(_BrokenClassifier)


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    yield from _serve(_SlowClassifier)


def test_failed_requests_fail_the_run_and_say_why(tmp_path: Path, broken_server: str) -> None:
    out = tmp_path / "broken"
    done = loadtest(
        "--url", broken_server, "--compare", broken_server, "--users", "2", "--duration", "3",
        "--probabilities-ratio", "1", "--out", str(out), timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert re.search(r"FAILED: .* \d+ of \d+ measured requests failed .* above --max-failure-ratio 0", done.stderr), done.stderr[-2000:]
    for run in (out, out / "compare"):  # --compare ran the same REST workload against the second URL
        stats = {e["name"]: e for e in json.loads((run / "stats.json").read_text())}
        classify = stats["rest classify_text (unique)"]
        assert classify["num_requests"] > 0 and classify["num_failures"] == classify["num_requests"]
        assert stats["rest list_categories"]["num_failures"] == 0
        assert not any(name.startswith("jsonrpc") or "batch" in name for name in stats)  # REST, no classify_batch
    report = (out / "report.md").read_text()
    assert "**Result: FAILED**" in report and "measured requests failed" in report
    assert len(report_totals(report)) == 2
    # The reason is in the result, in each run's section with its count, and on stderr: not only in Locust's CSV.
    reason = re.escape("× `probabilities sum to 1.5000, not 1` (rest classify_text (unique))")
    result = report.split("## Capacity")[0]
    assert "Why requests failed" in result and re.search(rf"- {re.escape(broken_server)}: \d+ {reason}", result), result
    per_run = [int(n) for n in re.findall(rf"^- (\d+) {reason}$", report, re.M)]
    assert per_run == [failed for _, failed in report_totals(report)], report
    assert re.search(rf"failed because: .* \d+ {reason}", done.stderr), done.stderr[-2000:]
    assert "/health could not be read" in report  # said, not hidden


def test_a_warm_up_that_cannot_finish_fails_the_run_before_any_step(tmp_path: Path, slow_server: str) -> None:
    out = tmp_path / "cold"
    done = loadtest(
        "--url", slow_server, "--steps", "1", "--step-duration", "3", "--hit-ratio", "0.5",
        "--warmup-timeout", str(WARMUP_BUDGET_S), "--out", str(out), timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    reason = f"the cache warm-up did not finish within {WARMUP_BUDGET_S} s"
    assert f"FAILED: mcp-classifier: {reason}" in done.stderr, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == [] and 0 <= summary["warm_up"]["done"] < summary["warm_up"]["texts"]
    report = (out / "report.md").read_text()
    assert "**Result: FAILED**" in report and reason in report
    assert not (out / CAPACITY_PLOT).exists()  # nothing measured: no empty plots
