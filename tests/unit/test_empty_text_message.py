"""An empty text and a whitespace-only text are the same mistake, so they get the same message.

"" is refused by classify_text's schema (minLength) and "   " by the tool's own check; the caller must not
have to learn that. classify_batch items say it the same way too. In process, over the fake backend.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

EMPTY_INPUTS = ["", "   ", "\t\n", "\u200b\u2003"]  # nothing; spaces; tabs and newlines; invisible characters


def call(client: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]


def error_of(result: dict[str, Any]) -> str:
    assert result["isError"] is True, result
    return str(orjson.loads(result["content"][0]["text"])["error"])


def test_classify_text_says_one_thing_for_every_empty_text(client: httpx.Client) -> None:
    messages = {text: error_of(call(client, "classify_text", {"text": text})) for text in EMPTY_INPUTS}
    assert len(set(messages.values())) == 1, messages
    assert messages[""] == "argument 'text' is empty: it has no visible characters"


@pytest.mark.parametrize("text", EMPTY_INPUTS, ids=["empty", "spaces", "tabs-newlines", "invisible"])
def test_classify_batch_items_say_it_the_same_way(client: httpx.Client, text: str) -> None:
    result = call(client, "classify_batch", {"texts": [text, "what is 2 + 2"]})
    assert result["isError"] is False, result
    bad = result["structuredContent"]["results"][0]
    assert bad == {"index": 0, "error": "text is empty: it has no visible characters"}, bad
