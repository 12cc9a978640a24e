"""`mcp-classifier loadtest`: real Locust processes against a real local stack (and against a broken server)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcp_classifier.loadtest.report import HIT_MISS_PLOT, LATENCY_PLOT

LOCUST_FILES = ["stats.json", "summary.json", "locust_stats.csv", "locust_stats_history.csv", "report.html", "report.md"]


def loadtest(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "loadtest", *args], capture_output=True, text=True, timeout=timeout_s
    )


def report_totals(report: str) -> list[tuple[int, int]]:
    """(requests, failures) of every '**total**' row of report.md."""
    return [(int(a), int(b)) for a, b in re.findall(r"\| \*\*total\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", report)]


def test_runner_against_the_local_stack_writes_locust_files_report_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = loadtest("--backend", "local", "--users", "4", "--spawn-rate", "4", "--duration", "15", "--hit-ratio", "0.5", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    for name in [*LOCUST_FILES, LATENCY_PLOT, HIT_MISS_PLOT]:
        assert (out / name).stat().st_size > 0, name
    for plot in (LATENCY_PLOT, HIT_MISS_PLOT):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / plot).stat().st_size > 10_000
    stats = json.loads((out / "stats.json").read_text())
    requests = sum(e["num_requests"] for e in stats)
    failures = sum(e["num_failures"] for e in stats)
    report = (out / "report.md").read_text()
    assert report_totals(report) == [(requests, failures)]  # the report's totals are Locust's JSON, not re-derived
    # How many requests a 15 s run makes depends on the host; that it measured some, all answered, does not.
    assert requests > 0 and failures == 0
    names = {e["name"] for e in stats}
    kinds = {"classify_text (repeat)", "classify_text (unique)", "classify_batch", "list_categories"}
    assert names <= {f"{style} {kind}" for style in ("jsonrpc", "rest") for kind in kinds}, names
    assert {name.split()[0] for name in names} == {"jsonrpc", "rest"}, names  # both styles' users ran
    assert json.loads((out / "summary.json").read_text())["total"]["num_requests"] == requests
    assert "![latency_throughput](latency_throughput.png)" in report
    assert re.search(r"\[loadtest\] mcp-classifier +\d+/15 s \| users +\d+ \|", done.stderr), done.stderr[-2000:]  # progress shown
    assert "locust" not in (out / "server.log").read_text().lower()  # the stack was ours, and it was stopped
    assert "| **total** |" in done.stdout  # the table is printed too


class _BrokenClassifier(BaseHTTPRequestHandler):
    """A REST-style MCP classifier whose probabilities sum to 1.5: every classify answer is invalid."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["name"] == "list_categories":
            payload: dict[str, Any] = {"categories": ["a", "b"], "category_system_prompts": {}, "category_descriptions": {}}
        else:
            payload = {"class": 0, "confidence": 0.75, "model": "m", "use_reasoning": False, "probabilities": [0.75, 0.75], "entropy": 0.5}
        answer = json.dumps({"content": [{"type": "text", "text": json.dumps(payload)}], "isError": False, "structuredContent": payload})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture()
def broken_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenClassifier)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_invalid_answer_is_a_locust_failure(tmp_path: Path, broken_server: str) -> None:
    out = tmp_path / "broken"
    done = loadtest(
        "--url", broken_server, "--compare", broken_server, "--users", "2", "--duration", "4",
        "--probabilities-ratio", "1", "--out", str(out), timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    for run in (out, out / "compare"):  # --compare ran the same REST workload against the second URL
        stats = {e["name"]: e for e in json.loads((run / "stats.json").read_text())}
        classify = stats["rest classify_text (unique)"]
        assert classify["num_requests"] > 0 and classify["num_failures"] == classify["num_requests"]
        assert stats["rest list_categories"]["num_failures"] == 0
        assert not any(name.startswith("jsonrpc") or "batch" in name for name in stats)  # REST, no classify_batch
    report = (out / "report.md").read_text()
    assert "## Side by side" in report and len(report_totals(report)) == 2
