"""eval's per-tag accuracy and its figures at the router's confidence threshold, on predictions made up here."""

from __future__ import annotations

import pytest

from mcp_classifier.evaluation.metrics import Evaluation, Prediction, evaluate
from mcp_classifier.evaluation.report import summary_table

TRUTH = ["math", "math", "history", "history", "science", "science"]
PREDICTED = [("math", 0.9), ("history", 0.4), ("history", 0.8), ("history", 0.55), ("math", 0.3), ("science", 0.7)]
TAGS = ["terse", "noisy", "terse", "chat", "noisy", None]


def _evaluation(threshold: float | None = 0.5) -> Evaluation:
    predictions = [Prediction(category, confidence) for category, confidence in PREDICTED]
    return evaluate("s", TRUTH, predictions, [None] * 6, [f"q{i}" for i in range(6)], TAGS, threshold)


def test_accuracy_per_tag_counts_only_that_tags_rows() -> None:
    e = _evaluation()
    assert e.per_tag == {"chat": {"n": 1, "accuracy": 1.0}, "noisy": {"n": 2, "accuracy": 0.0}, "terse": {"n": 2, "accuracy": 1.0}}
    assert e.accuracy == pytest.approx(4 / 6)  # the untagged row still counts overall


def test_answered_share_and_accuracy_at_the_threshold() -> None:
    e = _evaluation(0.5)
    # confidences >= 0.5: rows 0, 2, 3, 5, all right
    assert e.answered_share == pytest.approx(4 / 6) and e.answered_accuracy == 1.0
    strict = _evaluation(0.85)
    assert strict.answered_share == pytest.approx(1 / 6) and strict.answered_accuracy == 1.0
    assert _evaluation(0.95).answered_accuracy is None  # nothing answered: no accuracy to claim
    assert _evaluation(None).answered_share is None


def test_the_summary_shows_the_threshold_and_every_tag() -> None:
    table = summary_table([_evaluation(0.5)])
    assert "answered (confidence ≥ 0.5)" in table and "66.7%" in table and "100.0%" in table
    assert "chat (n=1)" in table and "noisy (n=2)" in table and "terse (n=2)" in table
