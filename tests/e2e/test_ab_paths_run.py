"""The A/B bench end to end: real `serve` processes in alternating rounds, each variant's environment its own.

A variant's environment must reach its server and no other, and a failed request must fail the run:
otherwise an A/B would credit one side with the other's settings, or count refusals as throughput.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from loadtests.ab_paths import main
from loadtests.harness.queries import TEXTS

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (.ci/run installs it)")


TEXT_COUNT = 16  # the floor and the host checks time every text, one at a time: a few make the same figures, sooner


@pytest.mark.timeout(900)  # two server starts and their host checks: a loaded 2-core host took over 150 s each
def test_each_variant_gets_its_own_environment_and_only_the_one_given_a_short_text_limit_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    short_limit = min(len(t) for t in TEXTS[:TEXT_COUNT]) + 10  # some texts pass, the longer ones are refused
    out = tmp_path / "ab.json"
    code = main(
        [
            "--rounds", "1", "--clients", "1", "--duration", "1", "--warmup", "1", "--settle", "0", "--raw-seconds", "0.3", "--texts", str(TEXT_COUNT),
            "--json", str(out),
            "--path", "plain=--backend local",
            "--path", f"short=MCP_CLASSIFIER_MAX_TEXT_LENGTH={short_limit} --backend local",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 1, captured.err  # the refused requests fail the run
    starts = [line for line in captured.err.splitlines() if line.startswith("[round ")]
    # One round, so two server starts: the order the rounds take turns in is round_order's unit test.
    assert [s.split("]")[0] for s in starts] == ["[round 1/1: plain", "[round 1/1: short"]
    assert all(f"MCP_CLASSIFIER_MAX_TEXT_LENGTH={short_limit} serve" in s for s in starts if ": short]" in s)
    assert not any("MCP_CLASSIFIER_MAX_TEXT_LENGTH" in s for s in starts if ": plain]" in s)
    figures = orjson.loads(out.read_bytes())
    assert figures["texts"] == TEXT_COUNT
    plain, short = (figures["variants"][name]["levels"]["1"] for name in ("plain", "short"))
    assert len(plain["rps"]) == len(short["rps"]) == 1
    assert all(r > 0 for r in plain["rps"] + short["rps"])
    assert plain["failures"] == [0]
    assert all(f > 0 for f in short["failures"])
    assert figures["variants"]["short"]["env"] == {"MCP_CLASSIFIER_MAX_TEXT_LENGTH": str(short_limit)}
    table = captured.out
    assert "| plain | 1 |" in table and "| short | 1 |" in table and "req/s vs plain" in table
    # The host's speed, taken in process before each server start, in the rounds' order.
    checks = figures["host_checks"]
    assert [c["label"] for c in checks] == ["round 1/1: plain", "round 1/1: short"]
    assert all(0 < c["raw_lone_ms"] < 1000 for c in checks)
    assert "host speed through the run (raw lone text in process, ms): reference " in table
