"""Errors say what is wrong (where, which rule, which limit) and never echo the caller's input.

A classify_batch of 300 texts of 3 KB (over max_batch_texts, 256) must not get its 900 KB back in the error.
On every door that words validation: the tool's isError result over JSON-RPC (both eras) and REST, and
the protocol errors that name a caller's method or tool. In process over the fake backend.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from mcp_classifier.protocol.excerpts import MAX_ECHO_CHARS, describe_value, excerpt

SHORT_ANSWER_BYTES = 1024  # an error answer, envelope and ids included, stays under this whatever the request's size
BIG_BATCH = {"texts": ["x" * 3000] * 300}  # ~900 KB: under the 1 MiB body limit, over the 256-text limit
HUGE_NAME = "n" * 100_000
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


def tool_error(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    return str(orjson.loads(result["content"][0]["text"])["error"])


def assert_says_what_is_wrong(message: str) -> None:
    assert "'texts'" in message and "300" in message and "256" in message, message
    assert "xxxxxxxxxx" not in message, "no part of the texts"


def test_a_big_classify_batch_gets_a_short_error_over_jsonrpc(client: httpx.Client) -> None:
    response = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "classify_batch", "arguments": BIG_BATCH}}
    )
    assert response.status_code == 200 and len(response.content) < SHORT_ANSWER_BYTES, len(response.content)
    assert_says_what_is_wrong(tool_error(response.json()["result"]))


def test_a_big_classify_batch_gets_a_short_error_in_the_stateless_era(client: httpx.Client) -> None:
    params = {"name": "classify_batch", "arguments": BIG_BATCH, "_meta": META}
    headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": "classify_batch"}
    response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers)
    assert response.status_code == 200 and len(response.content) < SHORT_ANSWER_BYTES, len(response.content)
    assert_says_what_is_wrong(tool_error(response.json()["result"]))


def test_a_big_classify_batch_gets_a_short_error_over_rest(client: httpx.Client) -> None:
    response = client.post("/mcp/tools/call", json={"name": "classify_batch", "arguments": BIG_BATCH})
    assert response.status_code == 200 and len(response.content) < SHORT_ANSWER_BYTES, len(response.content)
    assert_says_what_is_wrong(tool_error(response.json()))


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"texts": "x" * 50_000}, ["'texts'", "must be an array", "50000 characters"]),
        ({"texts": ["a"], "with_probabilities": "y" * 50_000}, ["'with_probabilities'", "must be a boolean"]),
        ({"texts": ["a"], **{f"extra{i}{'z' * 5000}": 1 for i in range(100)}}, ["unknown argument(s)", "and 95 more"]),
        ({}, ["missing required argument(s): 'texts'"]),
    ],
    ids=["long string for an array", "long string for a boolean", "many long unknown names", "missing"],
)
def test_argument_errors_name_the_rule_without_the_value(client: httpx.Client, arguments: dict[str, Any], words: list[str]) -> None:
    response = client.post("/mcp/tools/call", json={"name": "classify_batch", "arguments": arguments})
    message = tool_error(response.json())
    assert all(word in message for word in words), message
    assert len(message) < SHORT_ANSWER_BYTES // 2, len(message)


def test_protocol_errors_naming_a_callers_method_or_tool_stay_short(client: httpx.Client) -> None:
    unknown_tool = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": HUGE_NAME}})
    unknown_method = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": HUGE_NAME})
    rest_unknown_tool = client.post("/mcp/tools/call", json={"name": HUGE_NAME})
    headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": HUGE_NAME}
    stateless_unknown = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 3, "method": HUGE_NAME, "params": {"_meta": META}}, headers=headers
    )
    for response in (unknown_tool, unknown_method, rest_unknown_tool, stateless_unknown):
        assert len(response.content) < SHORT_ANSWER_BYTES, (response.request.url, len(response.content))
        assert "nnnnnnnnnn" in response.text, "a short prefix still says which name"


def test_excerpts_are_bounded() -> None:
    assert excerpt("short") == "'short'"
    assert excerpt("y" * 10_000) == f"{'y' * MAX_ECHO_CHARS!r}... (10000 characters)"
    assert describe_value(["a"] * 1000) == "an array of 1000 item(s)" and describe_value({"k": 1}) == "an object with 1 key(s)"
    assert describe_value(10**100) == "a number of 101 digits" and describe_value(True) == "true" and describe_value(None) == "null"
