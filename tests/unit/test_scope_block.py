"""`/health` and list_categories show the scope block in every case, never null.

The README's router section runs `jq .scope` on /health. With the packaged default file (detection off:
its `general` category takes anything) there is nothing fitted, so the block says detection is off and what
that means (every query in scope: coverage 1, recall 0, no thresholds) instead of being null; a file with
detection on shows its fitted figures beside `detect_out_of_scope: true`. In process, over the fake backend.
"""

from __future__ import annotations

from typing import Any

import httpx

from mcp_classifier.classify.scope_stats import ScopeStats, public_scope

DEFAULT_NAMES = ["math", "science", "technology", "history", "general"]


def list_categories(client: httpx.Client) -> dict[str, Any]:
    response = client.post("/mcp/tools/call", json={"name": "list_categories", "arguments": {}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["isError"] is False, body
    return body["structuredContent"]


def test_the_default_file_shows_a_scope_block_that_says_detection_is_off(client: httpx.Client) -> None:
    health = client.get("/health").json()
    scope = health["scope"]
    assert scope is not None, "jq .scope printed null"
    assert scope["detect_out_of_scope"] is False
    assert scope["expected_coverage"] == 1.0 and scope["expected_out_of_scope_recall"] == 0.0
    assert list(scope["categories"]) == DEFAULT_NAMES
    assert all(c["threshold"] is None and c["expected_coverage"] == 1.0 for c in scope["categories"].values())
    assert list_categories(client)["scope"] == scope, "both doors show the same block"


def test_a_file_with_detection_on_shows_its_fitted_figures() -> None:
    stats = ScopeStats(thresholds=(0.41, 0.38), coverage=(0.9, 0.8), out_of_scope_recall=0.75, negatives=40, overridden=(False, True))
    scope = public_scope(stats, ["a", "b"], detect=True)
    assert scope["detect_out_of_scope"] is True
    assert scope["expected_out_of_scope_recall"] == 0.75 and scope["expected_coverage"] == 0.85 and scope["negatives"] == 40
    assert scope["categories"]["a"]["threshold"] == 0.41 and scope["categories"]["b"]["from_file"] is True
    assert set(scope) == set(public_scope(None, ["a", "b"], detect=False)), "the same keys whether detection is on or off"
    assert set(scope["categories"]["a"]) == set(public_scope(None, ["a"], detect=False)["categories"]["a"])
    assert scope["typical_in_scope_probability"] is None  # a fit that does not say


def test_the_typical_in_scope_probability_is_each_categorys_and_their_median() -> None:
    stats = ScopeStats((0.4, 0.3, 0.2), (1.0, 1.0, 1.0), 0.9, 50, (False,) * 3, typical=(0.7, 0.8, 0.95))
    scope = public_scope(stats, ["a", "b", "c"], detect=True)
    assert scope["typical_in_scope_probability"] == 0.8
    assert [c["typical_in_scope_probability"] for c in scope["categories"].values()] == [0.7, 0.8, 0.95]
    assert ScopeStats.from_dict(stats.to_dict()) == stats  # kept in the start cache as it was fitted
    off = public_scope(None, ["a"], detect=False)
    assert off["typical_in_scope_probability"] == 1.0 and off["categories"]["a"]["typical_in_scope_probability"] == 1.0
