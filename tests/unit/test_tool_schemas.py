"""Every tool the service lists carries a valid JSON Schema: the registry checks a schema only at the first call that
needs the full validator (jsonschema stays off the handshake's path), so this is where a broken one shows first."""

from __future__ import annotations

import asyncio

from jsonschema import Draft202012Validator

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support.fake_backend import FakeBackend


def test_every_listed_tool_has_a_valid_draft_2020_12_input_schema() -> None:
    definitions = build_dispatcher(Settings(), FakeBackend()).tools.definitions()
    assert {d["name"] for d in definitions} >= {"classify_text", "select_tools"}
    for definition in definitions:
        Draft202012Validator.check_schema(definition["inputSchema"])


def test_arguments_the_quick_check_cannot_judge_still_meet_the_full_schema() -> None:
    tools = build_dispatcher(Settings(), FakeBackend()).tools
    result = asyncio.run(tools.call("classify_text", {"text": ["not", "a", "string"]}))
    assert result["isError"] is True
    assert "text" in result["content"][0]["text"]
