"""The benchmarks' wrk driver against a real gateway: it counts answers, and counts failed ones as failures.

A benchmark that silently counted error answers as throughput would flatter every figure it prints.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtests.harness.queries import TEXTS
from loadtests.harness.wrk import Wrk
from tests.support.processes import start_server

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (.ci/run installs it)")


def test_wrk_measures_answers_and_counts_error_results_as_failures(tmp_path: Path) -> None:
    short_limit = min(len(t) for t in TEXTS) + 10  # some texts pass, the longer ones are refused with isError
    server = start_server(tmp_path, "--no-cache", "--max-text-length", str(short_limit))
    try:
        refused = sum(len(t) > short_limit for t in TEXTS)
        assert 0 < refused < len(TEXTS)
        result = Wrk(TEXTS).run(server.url, clients=2, seconds=2)
    finally:
        server.stop()
    assert result.rps > 0 and result.p50_ms > 0 and result.p99_ms >= result.p50_ms
    answered = result.ok + result.failures
    # wrk cycles through the texts in order, so the refused share is the texts' refused share.
    assert result.failures / answered == pytest.approx(refused / len(TEXTS), abs=0.1), (result, refused)
