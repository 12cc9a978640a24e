"""The identifier shapes in a request and the parameter words they bring to BM25's query."""

from __future__ import annotations

import pytest

from mcp_classifier.toolfilter.query_identifiers import identifier_words, keyword_query


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("summarize https://example.com/blog/post-123 for me", "url link page web"),
        ("email it to legal@acme.com", "email address"),
        ("add Sam and Lee to #proj-atlas", "channel"),
        ("check PR #1204", "number id"),
        ("copy /Templates/nda.docx to the client folder", "path file folder"),
        ("attach report.pdf", "file path"),
        ("mark MOB-311 as blocked", "issue key ticket"),
        ("open PRs on acme/webapp", "repo repository owner"),
        ('project = OPS AND status = "In Progress"', "query filter"),
        ("SELECT count(*) FROM orders", "sql query"),
        ("ask @maria.lopez", "user mention"),
        ("revert 3fa9c1e", "commit sha ref"),
    ],
)
def test_each_shape_brings_the_words_tools_use_for_its_parameter(request_text: str, expected: str) -> None:
    assert identifier_words(request_text) == expected


def test_plain_requests_and_look_alikes_bring_nothing() -> None:
    assert identifier_words("what's the weather in Lisbon tomorrow") == ""
    assert identifier_words("red and/or blue") == "repo repository owner"  # a known look-alike: BM25 only, never the encoder
    assert identifier_words("C# and F# tips") == ""  # a hash after a letter is not a channel
    assert identifier_words("the deadbeef cafe") == ""  # hex-looking words without a digit are words


def test_a_urls_own_path_is_not_a_file_path_and_other_schemes_name_themselves() -> None:
    assert identifier_words("read https://nodejs.org/en/blog/release/v22.0.0") == "url link page web"
    assert identifier_words("download s3://acme-reports/q2/summary.csv") == ""  # "s3" is in the request already


def test_each_word_is_added_once_after_the_request() -> None:
    assert keyword_query("move /a/b and /c/d into x.pdf") == "move /a/b and /c/d into x.pdf path file folder"
    assert keyword_query("hello") == "hello"
