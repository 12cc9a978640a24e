"""The tests' one readiness wait: it grows with the host's load, the slowest start seen, and what a start costs."""

from __future__ import annotations

import pytest

from tests.support import processes
from tests.support.processes import EMBEDDED_RAY_START_COST, MAX_READY_WAIT_S, StartBudget, start_cost


def test_the_last_backend_given_decides_what_a_start_costs() -> None:
    assert start_cost(()) == 1.0
    assert start_cost(("--backend", "ray", "--no-cache")) == EMBEDDED_RAY_START_COST
    assert start_cost(("--backend", "ray", "--backend", "grpc://127.0.0.1:1")) == 1.0
    assert start_cost(("--categories-file", "ray")) == 1.0  # a value that reads "ray" is not a backend


def test_the_wait_scales_with_load_slowest_start_and_cost_up_to_its_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    budget = StartBudget(minimum_s=100.0, factor=4.0)
    monkeypatch.setattr(processes, "host_load", lambda: 1.0)
    assert budget.wait_s() == 100.0
    monkeypatch.setattr(processes, "host_load", lambda: 2.5)
    assert budget.wait_s() == 250.0
    assert budget.wait_s(cost=3.0) == 750.0
    budget.record(80.0, cost=2.0)  # 40 s per gateway start's worth
    monkeypatch.setattr(processes, "host_load", lambda: 1.0)
    assert budget.wait_s() == 160.0
    assert budget.wait_s(cost=EMBEDDED_RAY_START_COST) == min(MAX_READY_WAIT_S, 640.0)
    assert budget.wait_s(cost=100.0) == MAX_READY_WAIT_S
