"""eval-tools' figures: recall@k and MRR on hand-made rankings, and the BM25 baseline on a tiny tool set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.evaluation.dataset import DatasetError
from mcp_classifier.evaluation.tool_retrieval import (
    RankedSet,
    RetrievalQuery,
    load_tool_set,
    query_slices,
    rank_all,
    render,
    render_confidence,
    render_needs,
    render_served,
    render_slices,
    score,
    served_outcome,
)
from tests.support.fake_backend import bag_of_words_vector

QUERIES = [RetrievalQuery("q1", ("a",)), RetrievalQuery("q2", ("b", "c"))]


def test_recall_at_k_and_mrr_as_defined() -> None:
    rankings = [["x", "a", "y", "z"], ["c", "x", "y", "z", "w", "b"]]
    s = score("s", rankings, QUERIES)
    assert s.recall[1] == pytest.approx((0 + 1 / 2) / 2)
    assert s.recall[5] == pytest.approx((1 + 1 / 2) / 2)
    assert s.recall[10] == pytest.approx(1.0)
    assert s.mrr == pytest.approx((1 / 2 + 1) / 2)
    assert s.complete == pytest.approx(0.5)  # the second query has one of its two tools in the top 5
    assert "| s | 2 | 4 | 0.250 | 0.750 | 1.000 | 0.750 | 0.500 |" in render([s], 4)


def fake_embed(texts: list[str], kind: str) -> np.ndarray:
    return np.vstack([bag_of_words_vector(t) for t in texts])


def test_every_system_ranks_the_tool_that_shares_the_words_first() -> None:
    tools = [
        {"name": "weather__forecast", "description": "Weather forecast: rain and temperature for a city."},
        {"name": "slack__post_message", "description": "Post a message to a Slack channel."},
        {"name": "jira__create_issue", "description": "Create a Jira issue."},
    ]
    rankings = rank_all(tools, [RetrievalQuery("post a message on slack", ("slack__post_message",))], fake_embed, 8192, 0.3).rankings
    assert set(rankings) == {"hybrid", "hybrid-whole", "hybrid-plain", "hybrid-unshaped", "embedding", "bm25", "bm25-actions"}
    for system, (ranking,) in rankings.items():
        assert ranking[0] == "slack__post_message", system
        assert sorted(ranking) == sorted(t["name"] for t in tools), system


def test_a_query_naming_an_unknown_tool_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "a", "description": "x"}]))
    (tmp_path / "q.jsonl").write_text(json.dumps({"query": "hi", "relevant": ["nope"]}) + "\n")
    with pytest.raises(DatasetError, match="nope"):
        load_tool_set(tmp_path / "q.jsonl", tmp_path / "tools.json")


def test_a_tools_list_result_and_openai_function_tools_evaluate_like_mcp_tools(tmp_path: Path) -> None:
    """eval-tools takes the tools in every form select_tools takes them, so a saved tools/list answer works."""
    mcp_tools = [
        {"name": "slack__post_message", "description": "Post a message to a Slack channel.", "inputSchema": {"type": "object"}},
        {"name": "jira__create_issue", "description": "Create a Jira issue.", "inputSchema": {"type": "object"}},
    ]
    openai_tools = [
        {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["inputSchema"]}}
        for t in mcp_tools
    ]
    (tmp_path / "q.jsonl").write_text(json.dumps({"query": "post on slack", "relevant": "slack__post_message"}) + "\n")
    rankings = []
    for form in ({"tools": mcp_tools}, openai_tools, mcp_tools):
        (tmp_path / "tools.json").write_text(json.dumps(form))
        tools, queries = load_tool_set(tmp_path / "q.jsonl", tmp_path / "tools.json")
        assert queries == [RetrievalQuery("post on slack", ("slack__post_message",))]
        rankings.append(rank_all(tools, queries, fake_embed, 8192, 0.3).rankings)
    assert rankings[0] == rankings[1] == rankings[2]
    assert rankings[0]["hybrid"][0][0] == "slack__post_message"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"name": "a"}, {"name": "a"}], "repeated: \\['a'\\]"),
        ([{"description": "no name"}], "tool 1: every tool needs a name"),
        ({"result": []}, "expected a JSON array of tools"),
    ],
)
def test_a_tool_list_the_filter_could_not_tell_apart_is_refused_with_the_reason(tmp_path: Path, tools: object, message: str) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    (tmp_path / "q.jsonl").write_text(json.dumps({"query": "hi", "relevant": ["a"]}) + "\n")
    with pytest.raises(DatasetError, match=message):
        load_tool_set(tmp_path / "q.jsonl", tmp_path / "tools.json")


def test_the_action_words_let_bm25_match_a_verb_the_tool_never_says() -> None:
    tools = [
        {"name": "tracker__list_issues", "description": "List the issues of a project."},
        {"name": "tracker__create_issue", "description": "Create an issue in a project."},
        {"name": "tracker__get_issue", "description": "Get one issue of a project by its number."},
    ]
    query = RetrievalQuery("file bug: login page broken", ("tracker__create_issue",))
    rankings = rank_all(tools, [query], fake_embed, 8192, 0.3).rankings
    assert rankings["bm25-actions"][0][0] == "tracker__create_issue"  # "file" is how people say create
    assert rankings["bm25"][0][0] != "tracker__create_issue"  # the tools' own words tie on "issue"
    wipe = RetrievalQuery("wipe issue 7", ("tracker__delete_issue",))
    tools.append({"name": "tracker__delete_issue", "description": "Delete an issue."})
    assert rank_all(tools, [wipe], fake_embed, 8192, 0.3).rankings["bm25-actions"][0][0] == "tracker__delete_issue"


def test_slices_split_by_tool_count_identifiers_and_whether_the_query_names_the_server() -> None:
    queries = [
        RetrievalQuery("list my asana tasks", ("asana__list_tasks",)),
        RetrievalQuery("what's on my plate today", ("asana__list_tasks",)),
        RetrievalQuery("post it in slack #general and file a ticket", ("slack__post_message", "jira__create_issue")),
        RetrievalQuery("file a ticket for whatever broke in the slack bot", ("slack__post_message", "jira__create_issue")),
    ]
    slices = query_slices(queries)
    assert slices == {
        "needs one tool": [0, 1],
        "needs two or more": [2, 3],
        "two or more, said apart (query_clauses splits it)": [2],
        "two or more, in one clause": [3],
        "carries an identifier": [2],
        "carries none": [0, 1, 3],
        "names the server": [0, 2, 3],
        "does not name it": [1],
    }
    rankings = {
        "hybrid": [["asana__list_tasks"], ["x"], ["slack__post_message", "jira__create_issue"], ["jira__create_issue"]],
        "hybrid-whole": [["asana__list_tasks"], ["x"], ["slack__post_message"], ["x"]],
        "hybrid-unshaped": [["asana__list_tasks"], ["x"], ["x"], ["x"]],
        "embedding": [["x"], ["x"], ["slack__post_message"], ["x"]],
        "bm25": [["asana__list_tasks"], ["asana__list_tasks"], ["x"], ["x"]],
    }
    table = render_slices(rankings, queries)
    assert "| needs one tool | 2 | 0.500 | 0.500 | 0.500 | 0.000 | 1.000 | 0.500 |" in table
    assert "| needs two or more | 2 | 0.750 | 0.250 | 0.000 | 0.250 | 0.000 | 0.500 |" in table
    assert "| two or more, said apart (query_clauses splits it) | 1 | 1.000 | 0.500 | 0.000 | 0.500 | 0.000 | 1.000 |" in table
    assert "| two or more, in one clause | 1 | 0.500 | 0.000 | 0.000 | 0.000 | 0.000 | 0.000 |" in table
    assert "| carries an identifier | 1 | 1.000 | 0.500 | 0.000 | 0.500 | 0.000 | 1.000 |" in table
    assert "| does not name it | 1 | 0.000 | 0.000 | 0.000 | 0.000 | 1.000 | 0.000 |" in table


def test_an_identifier_lets_bm25_match_the_parameter_that_takes_it() -> None:
    tools = [
        {"name": "web__search", "description": "Web search results on any topic.", "inputSchema": {"properties": {"q": {}}}},
        {"name": "web__fetch", "description": "Fetch one page, return its text.", "inputSchema": {"properties": {"url": {}}}},
        {"name": "chat__post", "description": "Post one message.", "inputSchema": {"properties": {"channel": {}, "text": {}}}},
    ]
    queries = [
        RetrievalQuery("summarize https://example.com/x", ("web__fetch",)),
        RetrievalQuery("tell #ops: outage", ("chat__post",)),
    ]
    rankings = rank_all(tools, queries, fake_embed, 8192, 0.3).rankings
    assert [r[0] for r in rankings["hybrid"]] == ["web__fetch", "chat__post"]
    assert [r[0] for r in rankings["hybrid-unshaped"]] == ["web__search", "web__search"]  # no shared word: list order


def test_without_server_prefixes_only_the_tool_count_slices_are_given() -> None:
    assert set(query_slices([RetrievalQuery("forecast", ("forecast",))])) == {"needs one tool"}


def test_what_a_caller_gets_is_the_hybrid_order_cut_at_the_cosine_threshold_and_top_k() -> None:
    ranked = RankedSet(
        names=["a", "b", "c"],
        rankings={"hybrid": [["b", "a", "c"], ["c", "a", "b"]]},
        cosines=np.array([[0.25, 0.5, 0.05], [0.2, 0.1, 0.12]]),
    )
    queries = [RetrievalQuery("q1", ("a",)), RetrievalQuery("q2", ("a", "b"))]
    loose = served_outcome(ranked, queries, top_k=2, threshold=0.1)
    assert (loose.recall, loose.mean_kept, loose.empty) == (pytest.approx((1 + 0.5) / 2), 2.0, 0)  # q2: c, a within top 2
    strict = served_outcome(ranked, queries, top_k=2, threshold=0.3)
    assert (strict.recall, strict.mean_kept, strict.empty) == (0.0, 0.5, 1)  # q1 keeps b only; q2 keeps nothing
    table = render_served([loose, strict], 2, 0.1)
    assert "| threshold 0.1 (the default for this model) | 0.750 | 2.0 | 0 |" in table
    assert "| threshold 0.3 | 0.000 | 0.5 | 1 |" in table


def test_the_confidence_table_bins_the_first_tools_and_the_needs_table_counts_the_asks() -> None:
    ranked = RankedSet(
        names=["a", "b", "c"],
        rankings={"hybrid": [["b", "a", "c"], ["c", "a", "b"]]},
        cosines=np.zeros((2, 3)),
        confidences={"hybrid": np.array([[0.05, 0.95, 0.15], [0.85, 0.05, 0.95]])},
        asks=[1, 2],
    )
    queries = [RetrievalQuery("q1", ("b",)), RetrievalQuery("q2", ("a", "c"))]
    table = render_confidence(ranked, queries, "hybrid")
    assert "first 10 tools of 2 requests" in table and "AUROC 1.000" in table
    assert "| 0.9-1.0 | 2 | 0.950 | 1.000 |" in table  # b for q1, c for q2: both needed
    assert "| 0.0-0.1 | 2 | 0.050 | 0.000 |" in table  # a for q1 and b for q2: neither
    assert "| 0.8-0.9 | 1 | 0.850 | 1.000 |" in table
    needs = render_needs(ranked, queries)
    assert "| needing one tool | 1 | 1.000 | 0.000 |" in needs and "| needing two or more | 1 | 0.000 | 1.000 |" in needs
