"""The everyday verbs a tool's name brings into its keyword text, and where they go (never into the embedded text)."""

from __future__ import annotations

from mcp_classifier.toolfilter.tool_actions import ACTION_WORDS, action_words, name_words
from mcp_classifier.toolfilter.tool_ranking import tool_texts


def test_names_split_in_every_style_tool_servers_use() -> None:
    assert name_words("github__create_issue") == ["github", "create", "issue"]
    assert name_words("createPullRequest") == ["create", "pull", "request"]
    assert name_words("issues.create-comment") == ["issues", "create", "comment"]


def test_each_action_in_the_name_brings_its_words_once() -> None:
    assert action_words("jira__create_issue") == ACTION_WORDS["create"]
    assert action_words("gitlab__merge_merge_request") == ACTION_WORDS["merge"]  # twice in the name, once in the text
    assert action_words("sheets__clear_range").split()[:2] == ["wipe", "empty"]
    assert action_words("weather__forecast") == ""  # no action word: nothing added


def test_the_words_go_to_the_keyword_text_before_the_parameters_and_never_into_the_summary() -> None:
    tool = {
        "name": "tracker__delete_issue",
        "description": "Delete an issue.",
        "inputSchema": {"type": "object", "properties": {"number": {"type": "integer", "description": "x" * 500}}},
    }
    summary, keyword_text = tool_texts(tool, 120)
    assert "wipe" not in summary and summary.endswith("Delete an issue.")
    assert "Asked as: " + ACTION_WORDS["delete"] in keyword_text  # kept even when long parameters are cut
    assert len(keyword_text) == 120
    plain = tool_texts(tool, 8192, with_action_words=False)[1]
    assert "wipe" not in plain and "Parameters: number" in plain
