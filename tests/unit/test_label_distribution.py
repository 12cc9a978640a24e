"""The router's label distribution, shaped from a result (protocol/label_distribution.py), and the categories file's
``fallback_label`` and ``multi_label``: pure, no app."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_classifier.classify.categories import CategoryFileError, load_categories
from mcp_classifier.classify.results import ClassificationResult
from mcp_classifier.protocol.jsonrpc import JsonRpcError
from mcp_classifier.protocol.label_distribution import LabelSet, label_distribution, read_router_request
from tests.support.router_rules import check_distribution

NAMES = ("math", "science", "history")
PROBABILITIES = (0.7, 0.2, 0.1)


def result(
    scope: float = 1.0, label_scores: tuple[float, ...] = (), probabilities: tuple[float, ...] = PROBABILITIES
) -> ClassificationResult:
    """A result whose confidence is the top probability times ``scope``, as the classifier makes it."""
    top = max(range(len(probabilities)), key=probabilities.__getitem__)
    return ClassificationResult(
        class_index=top,
        category=NAMES[top],
        confidence=probabilities[top] * scope,
        model="m",
        use_reasoning=False,
        probabilities=probabilities,
        entropy=0.8,
        in_scope=scope >= 0.5,
        label_scores=label_scores,
    )


def test_the_scope_probability_is_read_back_from_confidence() -> None:
    assert result(0.25).scope_probability == pytest.approx(0.25)
    assert result(1.0).scope_probability == 1.0
    assert ClassificationResult.from_dict(result(0.4).to_dict()).scope_probability == pytest.approx(0.4)


def test_without_a_fallback_label_the_router_sees_the_category_probabilities() -> None:
    answer = label_distribution(result(0.2), LabelSet(NAMES))
    assert answer == [{"label": n, "score": p} for n, p in zip(NAMES, PROBABILITIES)]  # the out-of-scope share is not visible
    check_distribution(answer, NAMES)


@pytest.mark.parametrize("scope", [1.0, 0.6, 0.1, 0.0])
def test_a_fallback_label_takes_the_out_of_scope_share_and_the_categories_are_scaled(scope: float) -> None:
    answer = label_distribution(result(scope), LabelSet(NAMES, "other"))
    scores = check_distribution(answer, [*NAMES, "other"])
    assert answer[-1]["label"] == "other" and scores["other"] == pytest.approx(1.0 - scope)
    assert [scores[n] for n in NAMES] == pytest.approx([p * scope for p in PROBABILITIES])
    assert sum(scores.values()) == pytest.approx(1.0)


def test_multi_label_uses_the_independent_scores_and_the_fallback_label_the_out_of_scope_share() -> None:
    answer = label_distribution(result(0.9, label_scores=(0.9, 0.8, 0.05)), LabelSet(NAMES, "other", multi_label=True))
    scores = check_distribution(answer, [*NAMES, "other"], multi_label=True)
    assert scores == pytest.approx({"math": 0.9, "science": 0.8, "history": 0.05, "other": 0.1})
    assert answer == label_distribution(result(0.9, label_scores=(0.9, 0.8, 0.05)), LabelSet(NAMES, "other", multi_label=True))


def test_multi_label_without_scores_falls_back_to_the_scaled_probabilities() -> None:
    """An answer from a replica that predates the scores: still in [0, 1], and still every label."""
    scores = check_distribution(label_distribution(result(0.5), LabelSet(NAMES, multi_label=True)), NAMES, multi_label=True)
    assert [scores[n] for n in NAMES] == pytest.approx([p * 0.5 for p in PROBABILITIES])


def test_scores_a_float_past_the_unit_interval_or_not_finite_are_clipped_into_it() -> None:
    answer = label_distribution(result(1.0, label_scores=(1.0 + 1e-12, math.nan, -1e-15)), LabelSet(NAMES, multi_label=True))
    assert [e["score"] for e in answer] == [1.0, 0.0, 0.0]


def test_an_answer_over_other_categories_is_not_shaped() -> None:
    with pytest.raises(ValueError, match="3 probabilities for 2 categories"):
        label_distribution(result(), LabelSet(("math", "science")))


# ---- the request ------------------------------------------------------------------------------------
def test_one_text_or_a_list_of_texts() -> None:
    one = read_router_request({"inputs": "hi there"}, 100, 4)
    assert one.texts == ["hi there"] and not one.batched
    many = read_router_request({"inputs": ["a b", "c d"]}, 100, 4)
    assert many.texts == ["a b", "c d"] and many.batched


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "'inputs' is missing"),
        ("text", "must be a JSON object"),
        ({"inputs": True}, "not a boolean"),
        ({"inputs": "x" * 101}, "longer than 100 characters"),
        ({"inputs": ["a"] * 5}, "5 items: at most 4"),
        ({"inputs": ["a", None]}, "item 2 is null"),
    ],
)
def test_bad_requests_say_what_is_wrong(body: Any, says: str) -> None:
    with pytest.raises(JsonRpcError, match=says):
        read_router_request(body, 100, 4)


# ---- the categories file ---------------------------------------------------------------------------------
def _file(tmp_path: Path, **top_level: Any) -> Path:
    data = {
        "categories": [{"name": "a", "description": "first", "examples": ["one"]}, {"name": "b", "description": "second"}],
        **top_level,
    }
    path = tmp_path / "categories.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_fallback_label_and_multi_label_are_read_and_change_the_category_set_version(tmp_path: Path) -> None:
    plain = load_categories(_file(tmp_path))
    assert plain.fallback_label is None and plain.multi_label is False
    labelled = load_categories(_file(tmp_path, fallback_label="other", multi_label=True))
    assert labelled.fallback_label == "other" and labelled.multi_label is True
    assert labelled.category_set_version != plain.category_set_version
    assert labelled.policy_version == plain.policy_version


@pytest.mark.parametrize(
    ("top_level", "says"),
    [
        ({"fallback_label": "a"}, "fallback_label 'a' is the name of a category"),
        ({"fallback_label": "  "}, "field 'fallback_label': must have visible text"),
        ({"fallback_label": 3}, "field 'fallback_label': must be text, not 3"),
        ({"multi_label": "sometimes"}, "field 'multi_label': must be true or false"),
        ({"multi_label": True, "detect_out_of_scope": False}, "multi_label: true needs detect_out_of_scope: true"),
    ],
)
def test_bad_label_settings_are_refused_in_the_files_terms(tmp_path: Path, top_level: dict[str, Any], says: str) -> None:
    with pytest.raises(CategoryFileError, match=says):
        load_categories(_file(tmp_path, **top_level))
