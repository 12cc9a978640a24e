"""Where a request's separate asks begin and end: the parts select_tools ranks beside the whole request."""

from __future__ import annotations

import pytest

from mcp_classifier.toolfilter.query_clauses import MAX_CLAUSES, request_clauses
from mcp_classifier.toolfilter.tool_ranking import interleave


@pytest.mark.parametrize(
    ("query", "parts"),
    [
        ("find the jira ticket about login and post its summary to #backend", ["find the jira ticket about login", "post its summary to #backend"]),
        ("describe the orders table first, then count yesterday's orders", ["describe the orders table first", "count yesterday's orders"]),
        ("download the contract from Dropbox. Email it to legal@acme.com", ["download the contract from Dropbox", "Email it to legal@acme.com"]),
        ("is it raining in Oslo? book me a taxi to the office", ["is it raining in Oslo", "book me a taxi to the office"]),
        ("scale the workers to ten replicas; tell #ops on slack", ["scale the workers to ten replicas", "tell #ops on slack"]),
    ],
)  # fmt: skip
def test_separate_asks_are_split_at_conjunctions_and_sentence_ends(query: str, parts: list[str]) -> None:
    assert request_clauses(query) == parts


@pytest.mark.parametrize("query", ["what's the weather in Oslo tomorrow", "rock and roll playlists", "show red and blue issues", ""])
def test_one_ask_gives_no_parts(query: str) -> None:
    assert request_clauses(query) == []


def test_a_noun_list_with_two_long_sides_is_split_too() -> None:
    # The rule cannot tell this from two asks; the whole request still ranks first, so its best tool stays on top.
    assert request_clauses("list the red and blue issues in acme/webapp") == ["list the red", "blue issues in acme/webapp"]


def test_a_long_chain_of_asks_is_capped() -> None:
    query = " and ".join(f"do thing number {i} now" for i in range(10))
    assert len(request_clauses(query)) == MAX_CLAUSES


def test_interleave_keeps_the_wholes_first_two_then_takes_turns_and_keeps_each_item_once() -> None:
    assert interleave([[1, 2, 3, 4], [3, 5, 1], [6]]) == [1, 2, 3, 6, 5, 4]
    assert interleave([[1, 2, 3, 4], [3, 5, 1], [6]], lead=1) == [1, 3, 6, 2, 5, 4]  # the earlier rule
    assert interleave([[2, 0, 1]]) == [2, 0, 1]
    assert interleave([]) == []
