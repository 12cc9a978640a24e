"""A labelled query about two topics (`also`): read from JSONL and CSV, and scored right on either label."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_classifier.evaluation.dataset import OUT_OF_SCOPE, DatasetError, accepted_labels, load_dataset
from mcp_classifier.evaluation.metrics import Prediction, evaluate


def test_also_is_read_as_a_name_a_list_or_a_csv_cell_and_ignored_on_null_labels(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text(
        '{"text": "charged twice and locked out", "label": "billing", "also": "account"}\n'
        '{"text": "refund and invoice and login", "label": "billing", "also": ["invoices", "account"]}\n'
        '{"text": "hi", "label": null, "also": "billing"}\n'
        '{"text": "plain", "label": "billing"}\n'
    )
    assert [q.also for q in load_dataset(jsonl)] == [("account",), ("invoices", "account"), (), ()]
    csv = tmp_path / "q.csv"
    csv.write_text("text,category,also\ncharged twice and locked out,billing,account|invoices\nplain,billing,\n")
    assert [q.also for q in load_dataset(csv)] == [("account", "invoices"), ()]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "x", "label": "billing", "also": 3}\n')
    with pytest.raises(DatasetError, match="`also`"):
        load_dataset(bad)


def test_an_answer_naming_the_second_topic_is_right_and_any_other_is_not(tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text(
        '{"text": "charged twice and locked out", "label": "billing", "also": "account"}\n'
        '{"text": "locked out again", "label": "account"}\n'
        '{"text": "charged twice and locked out, again", "label": "billing", "also": "account"}\n'
        '{"text": "hello", "label": null}\n'
    )
    queries = load_dataset(data)
    answers = [Prediction("account", 0.8), Prediction("billing", 0.7), Prediction("shipping", 0.6), Prediction(OUT_OF_SCOPE, 0.1)]
    truth = accepted_labels(queries, [a.category for a in answers])
    assert truth == ["account", "account", "billing", OUT_OF_SCOPE]
    e = evaluate("s", truth, answers, [None] * 4, [q.text for q in queries])
    assert e.accuracy == pytest.approx(2 / 4)  # the two-topic query answered with its second topic, and the null one
    assert e.scope is not None and e.scope["in_scope_accuracy"] == pytest.approx(1 / 3)
