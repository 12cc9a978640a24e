"""Accuracy on the peer's 34 end-to-end cases, read from ../shared (a check, never training data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier
from tests.support import assert_valid_classification


@pytest.fixture(scope="module")
def peer_cases(peer_dir: Path) -> list[dict]:
    cases = [case for f in sorted(peer_dir.glob("mcp_*_cases.json")) for case in json.loads(f.read_text())]
    assert len(cases) == 34, f"expected the peer's 34 e2e cases, found {len(cases)}"
    return cases


@pytest.fixture(scope="module")
def results(peer_cases: list[dict]) -> list[dict]:
    classifier = build_classifier(Settings(model="builtin:minilm"))
    return [r.to_public(with_probabilities=True) for r in classifier.classify([c["query"] for c in peer_cases])]


def test_right_category_on_at_least_33_of_34(peer_cases: list[dict], results: list[dict], category_count: int) -> None:
    names = ["math", "science", "technology", "history", "general"]
    right = [c for c, r in zip(peer_cases, results) if r["category"] == c["expected_category"]]
    for r in results:
        assert_valid_classification(r, category_count)
        assert names[r["class"]] == r["category"]
    misses = [(c["query"], r["category"]) for c, r in zip(peer_cases, results) if r["category"] != c["expected_category"]]
    assert len(right) >= 33, f"{len(right)}/34 right; misses: {misses}"


def test_right_category_with_enough_confidence_on_at_least_30_of_34(peer_cases: list[dict], results: list[dict]) -> None:
    good = [
        c
        for c, r in zip(peer_cases, results)
        if r["category"] == c["expected_category"] and r["confidence"] >= c.get("expected_confidence_min", 0.0)
    ]
    assert len(good) >= 30, f"only {len(good)}/34 right with confidence >= the case's minimum"


def test_use_reasoning_matches_the_cases_that_state_it(peer_cases: list[dict], results: list[dict]) -> None:
    stated = [(c, r) for c, r in zip(peer_cases, results) if "expected_use_reasoning" in c]
    assert stated, "the peer's cases should state use_reasoning for some queries"
    wrong = [c["query"] for c, r in stated if r["use_reasoning"] != c["expected_use_reasoning"]]
    assert not wrong, f"use_reasoning differs from the cases for: {wrong}"
    for c, r in stated:
        if "expected_model" in c:
            assert r["model"] == c["expected_model"]
