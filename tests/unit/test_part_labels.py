"""A second label read from a query's parts: where a query is cut, and when two parts name two categories."""

from __future__ import annotations

import numpy as np

from mcp_classifier.classify.part_labels import PART_PROBABILITY, part_label_mask
from mcp_classifier.classify.query_parts import MAX_PARTS, topic_parts
from mcp_classifier.evaluation.metrics import Prediction, evaluate, second_label_metrics
from mcp_classifier.evaluation.report import summary_table


def test_a_query_is_cut_at_sentence_ends_commas_and_joining_words() -> None:
    assert topic_parts("I was charged a no-show fee, but I cancelled that appointment a day ahead.") == [
        "I was charged a no-show fee",
        "I cancelled that appointment a day ahead",
    ]
    assert topic_parts("My card was declined abroad. Why am I paying a foreign fee?") == [
        "My card was declined abroad",
        "Why am I paying a foreign fee",
    ]
    assert topic_parts("Can the doctor renew my inhaler — will insurance cover it") == [
        "Can the doctor renew my inhaler",
        "will insurance cover it",
    ]


def test_a_single_clause_or_short_pieces_give_no_parts() -> None:
    assert topic_parts("Please send my latest lab results to my cardiologist") == []
    assert topic_parts("Hi, thanks! Reset my password please") == []  # "Hi" and "thanks" carry no topic
    assert topic_parts("red and blue") == []


def test_a_long_prompt_is_judged_by_its_first_parts() -> None:
    prompt = ". ".join(f"this is sentence number {i}" for i in range(3 * MAX_PARTS))
    assert topic_parts(prompt) == [f"this is sentence number {i}" for i in range(MAX_PARTS)]


def _mask(part_probabilities: list[list[float]], in_scope: float = 0.9) -> np.ndarray:
    query = np.array([[0.9, 0.07, 0.03]])  # the whole query: category 0 first, 1 second
    parts = np.array(part_probabilities)
    return part_label_mask(query, [np.arange(len(parts))], parts, np.full(parts.shape, in_scope))


def test_two_parts_that_pick_the_first_and_second_categories_add_the_second() -> None:
    assert _mask([[0.8, 0.1, 0.1], [0.1, 0.7, 0.2]]).tolist() == [[False, True, False]]


def test_parts_that_all_pick_one_category_add_nothing() -> None:
    assert not _mask([[0.8, 0.1, 0.1], [0.9, 0.05, 0.05]]).any()


def test_a_part_under_the_probability_or_out_of_its_scope_picks_nothing() -> None:
    weak = PART_PROBABILITY - 0.05
    assert not _mask([[0.8, 0.1, 0.1], [0.1, weak, 1 - weak - 0.1]]).any()
    assert not _mask([[0.8, 0.1, 0.1], [0.1, 0.7, 0.2]], in_scope=0.3).any()


def test_a_part_may_name_only_the_query_s_second_category() -> None:
    """A third category a part picks is not the query's: the whole query ranks it below the second."""
    assert not _mask([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]]).any()


def test_a_query_without_parts_gets_no_second_label() -> None:
    query = np.array([[0.5, 0.45, 0.05]])
    assert not part_label_mask(query, [np.arange(0)], np.zeros((0, 3)), np.zeros((0, 3))).any()


def test_eval_scores_labels_on_two_topic_and_one_topic_queries() -> None:
    topics = [("billing", "login"), ("billing", "login"), ("billing",), ("login",), ()]
    answers = [
        Prediction("billing", 0.9, labels=("billing", "login")),  # both topics
        Prediction("login", 0.8, labels=("login",)),  # one of two
        Prediction("billing", 0.9, labels=("billing", "bug_report")),  # a second label on a one-topic query
        Prediction("login", 0.9, labels=("login",)),
        Prediction("(out of scope)", 0.1),
    ]
    assert second_label_metrics(topics, answers) == {"two_topic_n": 2, "both": 0.5, "one_topic_n": 2, "false_second": 0.5}
    truth = ["billing", "login", "billing", "login", "(out of scope)"]
    evaluation = evaluate("local", truth, answers, [None] * 5, ["q"] * 5, topics=topics)
    assert "| local | 2 | 50.0% | 2 | 50.0% |" in summary_table([evaluation])
    assert evaluate("local", truth, answers, [None] * 5, ["q"] * 5, topics=[(t[0],) if t else () for t in topics]).second_labels is None
