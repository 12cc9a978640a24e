"""doctor's figures on labelled queries with null labels, and its list of small categories, on answers made for them.

No model: the answers are written here, so each figure is checked against a hand count and against eval's own
(metrics.scope_metrics), and the report's lines for the cases a real file rarely shows (every query labelled null,
detection turned off) are read as they print.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcp_classifier.classify.categories import CategoryConfig
from mcp_classifier.classify.scope import SMALL_CATEGORY_EXAMPLES
from mcp_classifier.evaluation.dataset import OUT_OF_SCOPE
from mcp_classifier.evaluation.doctor import Diagnosis, diagnose, query_scope, render
from mcp_classifier.evaluation.metrics import Prediction, scope_metrics, second_label_metrics

TRUTH = ["a", "a", "b", OUT_OF_SCOPE, OUT_OF_SCOPE, OUT_OF_SCOPE]
ANSWERS = [
    Prediction("a", 0.9),  # right
    Prediction(OUT_OF_SCOPE, 0.2),  # an in-scope query said out: the wrong side
    Prediction("b", 0.8),  # right
    Prediction(OUT_OF_SCOPE, 0.1),  # caught
    Prediction(OUT_OF_SCOPE, 0.1),  # caught
    Prediction("b", 0.6),  # missed: the wrong side
]
TEXTS = [f"q{i}" for i in range(len(TRUTH))]


def _diagnosis(examples_per_category: tuple[int, ...]) -> tuple[CategoryConfig, Diagnosis]:
    """A diagnosis of a file whose categories have these many examples, on orthogonal unit vectors."""
    categories = [
        {"name": f"c{i}", "description": f"category {i}", "examples": [f"example {i}.{j}" for j in range(n)]}
        for i, n in enumerate(examples_per_category)
    ]
    config = CategoryConfig.model_validate({"categories": categories})
    dimensions = 16
    rng = np.random.default_rng(3)
    example_vectors = np.vstack(
        [np.eye(dimensions)[i] + 0.1 * rng.standard_normal((n, dimensions)) for i, n in enumerate(examples_per_category)]
    )
    example_vectors /= np.linalg.norm(example_vectors, axis=1, keepdims=True)
    description_vectors = np.eye(dimensions)[: len(examples_per_category)]
    return config, diagnose(config, example_vectors, description_vectors, "neighbours", lexical="off")


def test_null_labelled_queries_get_evals_figures_and_the_wrong_side_is_listed() -> None:
    figures = query_scope(TRUTH, TEXTS, ANSWERS)
    assert {k: v for k, v in figures.items() if k != "wrong_side"} == scope_metrics(TRUTH, ANSWERS)
    assert (figures["in_scope_n"], figures["out_of_scope_n"]) == (3, 3)
    assert figures["out_of_scope_recall"] == pytest.approx(2 / 3) and figures["in_scope_accuracy"] == pytest.approx(2 / 3)
    assert figures["wrong_side"] == [
        {"text": "q1", "expected": "a", "answered": OUT_OF_SCOPE},
        {"text": "q5", "expected": OUT_OF_SCOPE, "answered": "b"},
    ]


def test_every_query_labelled_null_and_detection_off_still_read_plainly() -> None:
    _, diagnosis = _diagnosis((6, 6))
    diagnosis.query_scope = query_scope([OUT_OF_SCOPE] * 2, ["x", "y"], [Prediction("c0", 0.7), Prediction(OUT_OF_SCOPE, 0.1)])
    assert diagnosis.query_scope["auroc"] is None  # no in-scope query to rank against: no figure, not NaN in the JSON
    text = render(diagnosis)  # scope None: the file turns detection off
    assert "50.0% of the 2 labelled null answered out of scope." in text
    assert "with a category" not in text and "turns out-of-scope detection off" in text
    assert "## Categories with too few examples" not in text


def test_the_small_categories_are_named_with_how_many_examples_to_add() -> None:
    _, diagnosis = _diagnosis((8, 3, 4))
    assert diagnosis.small == [
        {"name": "c1", "examples": 3, "add": SMALL_CATEGORY_EXAMPLES - 3},
        {"name": "c2", "examples": 4, "add": SMALL_CATEGORY_EXAMPLES - 4},
    ]
    text = render(diagnosis)
    assert "## Categories with too few examples" in text and "| c1 | 3 | 2 |" in text and "| c2 | 4 | 1 |" in text
    assert "| c0 | 8 |" not in text.split("## Categories with too few examples")[1].split("##")[0]


def test_queries_with_a_second_topic_get_eval_s_labels_figures() -> None:
    _, diagnosis = _diagnosis((6, 6))
    topics = [("c0", "c1"), ("c0", "c1"), ("c0",), ("c1",)]
    answers = [
        Prediction("c0", 0.9, labels=("c0", "c1")),
        Prediction("c1", 0.9, labels=("c1",)),
        Prediction("c0", 0.9, labels=("c0", "c1")),
        Prediction("c1", 0.9, labels=("c1",)),
    ]
    diagnosis.query_labels = second_label_metrics(topics, answers)
    text = render(diagnosis)
    assert "of the 2 queries with a second topic (`also`), 50.0% answered with both; of the 2 with one, 50.0% given a second label." in text
