"""eval's per-tag accuracy, its figures at the router's confidence threshold and the ECE it is read against,
on predictions made up here."""

from __future__ import annotations

import numpy as np
import pytest

from mcp_classifier.evaluation.metrics import Evaluation, Prediction, calibrated_ece, evaluate, expected_calibration_error
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


def test_ece_if_calibrated_is_the_noise_a_calibrated_model_shows_on_that_many_items() -> None:
    rng = np.random.default_rng(7)
    small = rng.uniform(0.5, 1.0, 60)
    large = rng.uniform(0.5, 1.0, 6000)
    # sixty queries: a model that is right exactly as often as it says still shows an ECE near 0.1
    assert 0.06 < calibrated_ece(small) < 0.15
    assert calibrated_ece(large) < 0.02  # the bias shrinks with the set
    assert calibrated_ece(np.ones(40)) == 0.0  # certain and always right: nothing to draw
    assert calibrated_ece(small) == calibrated_ece(small)  # a fixed seed: the same report every run
    # a truly calibrated draw lands near the floor; a model 0.3 over-confident lands far above it
    honest = [expected_calibration_error(small, rng.random(60) < small)[0] for _ in range(50)]
    assert abs(float(np.mean(honest)) - calibrated_ece(small)) < 0.02
    overconfident = expected_calibration_error(small, rng.random(60) < small - 0.3)[0]
    assert overconfident > calibrated_ece(small) + 0.15


def test_the_summary_shows_the_ece_beside_its_calibrated_floor() -> None:
    e = _evaluation(None)
    assert e.ece_if_calibrated == pytest.approx(calibrated_ece(np.array([c for _, c in PREDICTED])))
    table = summary_table([e])
    assert "| ECE | ECE if calibrated |" in table and f"| {e.ece:.3f} | {e.ece_if_calibrated:.3f} |" in table
