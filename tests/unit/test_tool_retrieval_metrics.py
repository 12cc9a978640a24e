"""eval-tools' figures: recall@k and MRR on hand-made rankings, and the BM25 baseline on a tiny tool set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.evaluation.dataset import DatasetError
from mcp_classifier.evaluation.tool_retrieval import RetrievalQuery, load_tool_set, render, score, system_rankings
from tests.support.fake_backend import bag_of_words_vector

QUERIES = [RetrievalQuery("q1", ("a",)), RetrievalQuery("q2", ("b", "c"))]


def test_recall_at_k_and_mrr_as_defined() -> None:
    rankings = [["x", "a", "y", "z"], ["c", "x", "y", "z", "w", "b"]]
    s = score("s", rankings, QUERIES)
    assert s.recall[1] == pytest.approx((0 + 1 / 2) / 2)
    assert s.recall[5] == pytest.approx((1 + 1 / 2) / 2)
    assert s.recall[10] == pytest.approx(1.0)
    assert s.mrr == pytest.approx((1 / 2 + 1) / 2)
    assert "| s | 2 | 4 | 0.250 | 0.750 | 1.000 | 0.750 |" in render([s], 4)


def fake_embed(texts: list[str], kind: str) -> np.ndarray:
    return np.vstack([bag_of_words_vector(t) for t in texts])


def test_every_system_ranks_the_tool_that_shares_the_words_first() -> None:
    tools = [
        {"name": "weather__forecast", "description": "Weather forecast: rain and temperature for a city."},
        {"name": "slack__post_message", "description": "Post a message to a Slack channel."},
        {"name": "jira__create_issue", "description": "Create a Jira issue."},
    ]
    rankings = system_rankings(tools, [RetrievalQuery("post a message on slack", ("slack__post_message",))], fake_embed, 8192, 0.3)
    assert set(rankings) == {"hybrid", "embedding", "bm25"}
    for system, (ranking,) in rankings.items():
        assert ranking[0] == "slack__post_message", system
        assert sorted(ranking) == sorted(t["name"] for t in tools), system


def test_a_query_naming_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "a", "description": "x"}]))
    (tmp_path / "q.jsonl").write_text(json.dumps({"query": "hi", "relevant": ["nope"]}) + "\n")
    with pytest.raises(DatasetError, match="nope"):
        load_tool_set(tmp_path / "q.jsonl", tmp_path / "tools.json")
