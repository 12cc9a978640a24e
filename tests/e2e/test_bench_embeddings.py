"""The embeddings bench on tiny inputs, our server only (CI has no Infinity): a real `serve` and a floor child.

A bounded-spin row whose server or floor child never got GOMP_SPINCOUNT would measure the passive wait under
another name; the tables' "seen" columns are what libgomp itself printed in those processes, so the test reads
them back, with every level's row.
"""

from __future__ import annotations

import shutil

import pytest

from loadtests.bench_embeddings import main

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (.ci/run installs it)")


def test_ours_alone_measures_every_level_under_the_spin_it_names(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--no-infinity", "--variants", "spin:1000", "--queries", "4", "--passages", "1", "--clients", "1,2"]
    argv += ["--duration", "1", "--warmup", "0", "--settle", "0", "--floor-seconds", "0.1", "--lone-texts", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| quiet |")]
    level_rows = [c for c in cells if len(c) > 10]  # the levels table's; the others have 3 (servers) and 9 (floors) cells
    levels = {(texts, int(clients), route) for _, texts, clients, server, route, *_ in level_rows if server == "ours spin 1000"}
    assert levels == {
        (t, c, r) for t in ("queries", "passages") for c in (1, 2) for r in ("embeddings", "classify") if (t, r) != ("passages", "classify")
    }
    for _, texts, clients, _server, route, rps, p50, p99, errors, *_ in level_rows:
        assert float(rps) > 0 and float(p50) > 0 and float(p99) >= float(p50) and errors == "0", (texts, clients, route)
    assert ["quiet", "ours spin 1000", "PASSIVE / 1000"] in cells  # libgomp in the server
    floor = next(c for c in cells if len(c) == 9)
    assert floor[:3] == ["quiet", "spin 1000", "PASSIVE / 1000"] and all(float(v) > 0 for v in floor[3:])  # libgomp in the floor child
    assert "min cosine" not in out  # nothing to compare with
