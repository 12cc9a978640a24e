"""JSON-RPC single endpoint `POST /mcp` (docs/protocol.md, "JSON-RPC on POST /mcp"): every envelope rule, in process.

The `client` fixture is the real app over a fake backend (tests/unit/conftest.py);
tests/e2e/test_http_real_model.py runs a chosen set of these same tests over real HTTP against
a real gateway process with the real model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import DEFAULT_MAX_BODY_BYTES, assert_valid_classification

SUPPORTED_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
FALLBACK_VERSION = "2025-06-18"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


# ---- helpers -----------------------------------------------------------------------------------
def post_raw(client: httpx.Client, content: bytes | str, headers: dict[str, str] | None = None) -> httpx.Response:
    """POST bytes to /mcp with exactly ``headers`` (plus Host and Content-Length, which HTTP/1.1 needs)."""
    request = httpx.Request(
        "POST",
        client.base_url.join("/mcp"),
        content=content.encode() if isinstance(content, str) else content,
        headers={"Content-Type": "application/json"} if headers is None else headers,
    )
    return client.send(request)


def post(client: httpx.Client, payload: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return client.post("/mcp", content=json.dumps(payload), headers={"Content-Type": "application/json", **(headers or {})})


def assert_json_answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].split(";")[0].strip() == "application/json", response.headers
    return response.json()


def rpc(
    client: httpx.Client, method: str, params: Any = None, request_id: Any = 1, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """One request; returns the whole response object after checking the envelope and the id."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    body = assert_json_answer(post(client, message, headers))
    assert isinstance(body, dict), body
    assert body["jsonrpc"] == "2.0", body
    assert body["id"] == request_id, body
    assert ("result" in body) != ("error" in body), body
    return body


def rpc_result(client: httpx.Client, method: str, params: Any = None, **kw: Any) -> dict[str, Any]:
    body = rpc(client, method, params, **kw)
    assert "result" in body, body
    return body["result"]


def rpc_error(client: httpx.Client, method: str, params: Any = None, **kw: Any) -> dict[str, Any]:
    body = rpc(client, method, params, **kw)
    assert "error" in body, body
    error = body["error"]
    assert isinstance(error["code"], int) and isinstance(error["message"], str) and error["message"], error
    return error


def assert_error_object(body: Any, code: int, request_id: Any = None) -> None:
    assert isinstance(body, dict), body
    assert body["jsonrpc"] == "2.0", body
    assert body["id"] == request_id, body
    assert "result" not in body, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    assert "Traceback" not in body["error"]["message"], body


def call_tool(client: httpx.Client, name: str, arguments: Any = None, request_id: Any = 7) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return rpc_result(client, "tools/call", params, request_id=request_id)


def tool_payload(result: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    """Check the call-result shape (docs/protocol.md, "Tools") and return the JSON carried in the text content."""
    assert result["isError"] is is_error, result
    content = result["content"]
    assert isinstance(content, list) and len(content) >= 1, result
    assert content[0]["type"] == "text", result
    payload = json.loads(content[0]["text"])
    assert isinstance(payload, dict), payload
    if is_error:
        assert isinstance(payload.get("error"), str) and payload["error"], payload
    else:
        assert result["structuredContent"] == payload, result
    return payload


def assert_server_alive(client: httpx.Client) -> None:
    assert rpc_result(client, "ping", request_id="alive") == {}


@pytest.fixture(scope="module")
def tool_defs(client: httpx.Client) -> dict[str, dict[str, Any]]:
    tools = rpc_result(client, "tools/list")["tools"]
    return {t["name"]: t for t in tools}


@pytest.fixture(scope="module")
def max_text_length(tool_defs: dict[str, dict[str, Any]]) -> int:
    return tool_defs["classify_text"]["inputSchema"]["properties"]["text"]["maxLength"]


@pytest.fixture(scope="module")
def categories(client: httpx.Client) -> list[str]:
    return tool_payload(call_tool(client, "list_categories", {}), is_error=False)["categories"]


# ---- initialize --------------------------------------------------------------------------------
@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_initialize_echoes_supported_protocol_version(client: httpx.Client, version: str) -> None:
    result = rpc_result(
        client,
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}},
    )
    assert result["protocolVersion"] == version


@pytest.mark.parametrize("version", ["1999-01-01", "2099-12-31", None])
def test_initialize_unsupported_or_missing_version_falls_back(client: httpx.Client, version: str | None) -> None:
    params: dict[str, Any] = {"capabilities": {}, "clientInfo": {"name": "pytest", "version": "1"}}
    if version is not None:
        params["protocolVersion"] = version
    assert rpc_result(client, "initialize", params)["protocolVersion"] == FALLBACK_VERSION


def test_initialize_result_shape(client: httpx.Client) -> None:
    result = rpc_result(
        client, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )
    info = result["serverInfo"]
    assert isinstance(info["name"], str) and info["name"]
    assert isinstance(info["version"], str) and info["version"]
    assert isinstance(result["capabilities"], dict)
    assert isinstance(result["capabilities"]["tools"], dict)
    assert isinstance(result["instructions"], str) and result["instructions"].strip()
    # The instructions should point a model at the tools it is meant to call.
    assert "classify_text" in result["instructions"]


def test_initialize_issues_no_session_and_ignores_incoming_one(client: httpx.Client) -> None:
    headers = {"Mcp-Session-Id": "bogus-session-from-another-replica"}
    response = post(
        client,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        },
        headers,
    )
    body = assert_json_answer(response)
    assert body["result"]["protocolVersion"] == "2025-06-18"
    assert "mcp-session-id" not in response.headers
    # A later request carrying an unknown session id is served normally (no 404 "session gone").
    response = post(client, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
    body = assert_json_answer(response)
    assert {t["name"] for t in body["result"]["tools"]} >= {"list_categories", "classify_text"}
    assert "mcp-session-id" not in response.headers


def test_tools_call_works_without_initialize(client: httpx.Client, category_count: int) -> None:
    # No initialize first (any replica may receive any request): the server keeps no per-client state.
    result = call_tool(client, "classify_text", {"text": "What is the integral of x squared?"})
    assert_valid_classification(tool_payload(result, is_error=False), category_count)


# ---- notifications, ping -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "notification",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "user"}},
        {"jsonrpc": "2.0", "method": "notifications/whatever/custom", "params": {}},
        {"jsonrpc": "2.0", "method": "not/a/known/method"},
        {"jsonrpc": "2.0", "method": "tools/call", "params": [1]},
    ],
    ids=["initialized", "cancelled", "custom-notification", "unknown-method-notification", "notification-with-bad-params"],
)
def test_notification_answers_202_with_empty_body(client: httpx.Client, notification: dict[str, Any]) -> None:
    response = post(client, notification)
    assert response.status_code == 202, response.text
    assert response.content == b""


def test_ping_returns_empty_object(client: httpx.Client) -> None:
    assert rpc_result(client, "ping") == {}
    assert rpc_result(client, "ping", {}, request_id="str-id") == {}


# ---- tools/list --------------------------------------------------------------------------------
def test_tools_list_declares_both_tools_with_schemas(client: httpx.Client) -> None:
    result = rpc_result(client, "tools/list")
    assert "nextCursor" not in result
    tools = {t["name"]: t for t in result["tools"]}
    assert {"list_categories", "classify_text"} <= set(tools)
    for tool in tools.values():
        assert isinstance(tool["description"], str) and tool["description"]
        assert tool["inputSchema"]["type"] == "object"
        assert tool["outputSchema"]["type"] == "object"
    schema = tools["classify_text"]["inputSchema"]
    assert "text" in schema["required"]
    assert schema["properties"]["text"]["type"] == "string"
    assert isinstance(schema["properties"]["text"]["maxLength"], int) and schema["properties"]["text"]["maxLength"] > 0
    assert schema["properties"]["with_probabilities"]["type"] == "boolean"
    assert "with_probabilities" not in schema.get("required", [])
    out = tools["classify_text"]["outputSchema"]
    assert {"class", "confidence", "model", "use_reasoning"} <= set(out["properties"])
    assert {"categories", "category_system_prompts", "category_descriptions"} <= set(tools["list_categories"]["outputSchema"]["properties"])
    # The description states the entropy's log base (docs/protocol.md, "Tools").
    assert any(word in tools["classify_text"]["description"].lower() for word in ("nats", "natural log", "bits", "log2", "base 2"))


def test_tools_list_accepts_cursor_and_omits_next_cursor(client: httpx.Client) -> None:
    plain = rpc_result(client, "tools/list")
    with_cursor = rpc_result(client, "tools/list", {"cursor": "opaque-cursor-value"})
    assert "nextCursor" not in with_cursor
    assert [t["name"] for t in with_cursor["tools"]] == [t["name"] for t in plain["tools"]]


# ---- tools/call --------------------------------------------------------------------------------
def test_classify_text_without_probabilities(client: httpx.Client, category_count: int, categories: list[str]) -> None:
    payload = tool_payload(call_tool(client, "classify_text", {"text": "Who won the battle of Hastings in 1066?"}), is_error=False)
    assert_valid_classification(payload, category_count)
    assert "probabilities" not in payload and "entropy" not in payload
    if "category" in payload:
        assert payload["category"] == categories[payload["class"]]


def test_classify_text_with_probabilities(client: httpx.Client, category_count: int, categories: list[str]) -> None:
    payload = tool_payload(
        call_tool(client, "classify_text", {"text": "Solve 3x + 5 = 20 for x", "with_probabilities": True}), is_error=False
    )
    assert_valid_classification(payload, category_count)
    probs = payload["probabilities"]
    assert len(probs) == category_count
    # Entropy is the Shannon entropy of the returned distribution (nats, as the tool description says).
    expected = -sum(p * math.log(p) for p in probs if p > 0)
    assert payload["entropy"] == pytest.approx(expected, abs=1e-3)
    if "category" in payload:
        assert payload["category"] == categories[payload["class"]]


def test_classify_text_with_probabilities_false_omits_them(client: httpx.Client, category_count: int) -> None:
    payload = tool_payload(
        call_tool(client, "classify_text", {"text": "How do CPUs cache memory?", "with_probabilities": False}), is_error=False
    )
    assert_valid_classification(payload, category_count)
    assert "probabilities" not in payload


def test_list_categories(client: httpx.Client, category_count: int) -> None:
    payload = tool_payload(call_tool(client, "list_categories", {}), is_error=False)
    names = payload["categories"]
    assert isinstance(names, list) and len(names) == category_count and all(isinstance(n, str) and n for n in names)
    assert len(set(names)) == len(names)
    assert set(payload["category_system_prompts"]) == set(names)
    assert set(payload["category_descriptions"]) == set(names)
    assert all(isinstance(v, str) for v in payload["category_system_prompts"].values())
    assert all(isinstance(v, str) for v in payload["category_descriptions"].values())


def test_list_categories_without_arguments_key(client: httpx.Client, category_count: int) -> None:
    payload = tool_payload(call_tool(client, "list_categories"), is_error=False)
    assert len(payload["categories"]) == category_count


def test_text_at_max_length_is_accepted(client: httpx.Client, category_count: int, max_text_length: int) -> None:
    text = ("What is the boiling point of water? " * (max_text_length // 36 + 1))[:max_text_length]
    assert len(text) == max_text_length
    payload = tool_payload(call_tool(client, "classify_text", {"text": text}), is_error=False)
    assert_valid_classification(payload, category_count)


# ---- logging/setLevel --------------------------------------------------------------------------
def test_logging_set_level_valid(client: httpx.Client) -> None:
    assert rpc_result(client, "logging/setLevel", {"level": "info"}) == {}


@pytest.mark.parametrize("params", [{"level": "verbose"}, {"level": 3}, {}], ids=["unknown-name", "number", "missing"])
def test_logging_set_level_invalid(client: httpx.Client, params: dict[str, Any]) -> None:
    assert rpc_error(client, "logging/setLevel", params)["code"] == INVALID_PARAMS


def test_logging_capability_only_when_set_level_works(client: httpx.Client) -> None:
    caps = rpc_result(
        client, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    )["capabilities"]
    if "logging" in caps:
        assert rpc_result(client, "logging/setLevel", {"level": "info"}) == {}
    else:
        assert rpc(client, "logging/setLevel", {"level": "info"}).get("error", {}).get("code") == METHOD_NOT_FOUND


# ---- unknown methods ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["no/such/method", "server/discover", "resources/templates/list_nope"])
def test_unknown_method_is_32601_with_http_200(client: httpx.Client, method: str) -> None:
    response = post(client, {"jsonrpc": "2.0", "id": 11, "method": method, "params": {}})
    body = assert_json_answer(response, 200)  # never 404: clients read that as "session gone"
    assert_error_object(body, METHOD_NOT_FOUND, 11)


# ---- parse errors ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', b"{not json}", b"", b"   ", b'{"jsonrpc":"2.0","id":1,"method":"ping",}'],
    ids=["truncated", "garbage", "empty", "whitespace", "trailing-comma"],
)
def test_bad_json_is_parse_error_with_null_id(client: httpx.Client, raw: bytes) -> None:
    body = assert_json_answer(post_raw(client, raw))
    assert_error_object(body, PARSE_ERROR, None)


def test_invalid_utf8_body_is_parse_error(client: httpx.Client) -> None:
    raw = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": "caf\xe9 \xff\xfe"}}}'
    body = assert_json_answer(post_raw(client, raw))
    assert_error_object(body, PARSE_ERROR, None)
    assert_server_alive(client)


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000],
    ids=["nested-arrays", "nested-objects"],
)
def test_deeply_nested_json_is_refused_and_server_survives(client: httpx.Client, raw: bytes) -> None:
    body = assert_json_answer(post_raw(client, raw))
    assert isinstance(body, dict), str(body)[:200]
    assert body["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), body
    assert body["id"] is None
    assert_server_alive(client)


# ---- invalid requests --------------------------------------------------------------------------
@pytest.mark.parametrize("payload", [42, "x", True, None, 3.5], ids=["int", "string", "bool", "null", "float"])
def test_non_object_payload_is_invalid_request(client: httpx.Client, payload: Any) -> None:
    body = assert_json_answer(post(client, payload))
    assert_error_object(body, INVALID_REQUEST, None)


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": 2.0, "id": 1, "method": "ping"},
    ],
    ids=["jsonrpc-missing", "jsonrpc-1.0", "jsonrpc-number"],
)
def test_bad_jsonrpc_version_is_invalid_request(client: httpx.Client, message: dict[str, Any]) -> None:
    body = assert_json_answer(post(client, message))
    assert body["error"]["code"] == INVALID_REQUEST, body
    assert body["id"] in (1, None), body
    assert "result" not in body


@pytest.mark.parametrize("method", [5, None, ["ping"], {"name": "ping"}], ids=["int", "null", "list", "object"])
def test_method_not_a_string_is_invalid_request(client: httpx.Client, method: Any) -> None:
    body = assert_json_answer(post(client, {"jsonrpc": "2.0", "id": 1, "method": method}))
    assert body["error"]["code"] == INVALID_REQUEST, body
    assert body["id"] in (1, None), body


def test_method_missing_is_invalid_request(client: httpx.Client) -> None:
    body = assert_json_answer(post(client, {"jsonrpc": "2.0", "id": 1, "params": {}}))
    assert body["error"]["code"] == INVALID_REQUEST, body


def test_null_id_is_invalid_request(client: httpx.Client) -> None:
    body = assert_json_answer(post(client, {"jsonrpc": "2.0", "id": None, "method": "ping"}))
    assert_error_object(body, INVALID_REQUEST, None)


# ---- bad params --------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [[1, 2], "text", 7], ids=["array", "string", "number"])
def test_params_not_an_object_is_invalid_params(client: httpx.Client, params: Any) -> None:
    assert rpc_error(client, "tools/list", params)["code"] == INVALID_PARAMS


def test_tools_call_without_name_is_invalid_params(client: httpx.Client) -> None:
    assert rpc_error(client, "tools/call", {"arguments": {"text": "hello"}})["code"] == INVALID_PARAMS


def test_tools_call_unknown_tool_is_invalid_params(client: httpx.Client) -> None:
    error = rpc_error(client, "tools/call", {"name": "no_such_tool", "arguments": {}})
    assert error["code"] == INVALID_PARAMS
    assert "no_such_tool" in error["message"]


def test_tools_call_arguments_not_an_object_is_invalid_params(client: httpx.Client) -> None:
    assert rpc_error(client, "tools/call", {"name": "classify_text", "arguments": ["hello"]})["code"] == INVALID_PARAMS


# ---- tool-level problems are isError results ---------------------------------------------------
@pytest.mark.parametrize(
    "arguments",
    [
        {"text": ""},
        {"text": "   \n\t  "},
        {"text": "\u0000\u0000\u200b"},
        {"text": "hello", "bogus_argument": 1},
        {},
        {"with_probabilities": True},
        {"text": 123},
        {"text": ["a", "b"]},
        {"text": None},
        {"text": "hello", "with_probabilities": "yes"},
    ],
    ids=[
        "empty",
        "whitespace",
        "control-chars-only",
        "unknown-argument",
        "missing-text",
        "missing-text-with-probs",
        "text-int",
        "text-list",
        "text-null",
        "probs-not-bool",
    ],
)
def test_tool_level_problem_is_error_result_not_protocol_error(client: httpx.Client, arguments: dict[str, Any]) -> None:
    tool_payload(call_tool(client, "classify_text", arguments), is_error=True)


def test_unknown_argument_error_names_the_argument(client: httpx.Client) -> None:
    payload = tool_payload(call_tool(client, "classify_text", {"text": "hi", "bogus_argument": 1}), is_error=True)
    assert "bogus_argument" in payload["error"]


def test_text_longer_than_max_is_error_result(client: httpx.Client, max_text_length: int) -> None:
    result = call_tool(client, "classify_text", {"text": "a" * (max_text_length + 1)})
    payload = tool_payload(result, is_error=True)
    assert str(max_text_length) in payload["error"]


def test_list_categories_unknown_argument_is_error_result(client: httpx.Client) -> None:
    tool_payload(call_tool(client, "list_categories", {"unexpected": True}), is_error=True)


# ---- batches -----------------------------------------------------------------------------------
def test_batch_answered_as_array_matched_by_id(client: httpx.Client, category_count: int) -> None:
    batch = [
        {
            "jsonrpc": "2.0",
            "id": "c",
            "method": "tools/call",
            "params": {"name": "classify_text", "arguments": {"text": "What causes tides?"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    body = assert_json_answer(post(client, batch))
    assert isinstance(body, list) and len(body) == 3, body
    by_id = {r["id"]: r for r in body}
    assert set(by_id) == {"c", 1, 2}
    assert all(r["jsonrpc"] == "2.0" for r in body)
    assert by_id[1]["result"] == {}
    assert {t["name"] for t in by_id[2]["result"]["tools"]} >= {"list_categories", "classify_text"}
    assert_valid_classification(tool_payload(by_id["c"]["result"], is_error=False), category_count)


def test_batch_with_mixed_valid_and_invalid_entries(client: httpx.Client) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        42,
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "1.0", "id": 4, "method": "ping"},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": ""}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    body = assert_json_answer(post(client, batch))
    assert isinstance(body, list) and len(body) == 6, body
    with_id = {r["id"]: r for r in body if r["id"] is not None}
    null_id = [r for r in body if r["id"] is None]
    assert with_id[1]["result"] == {}
    assert with_id[3]["error"]["code"] == METHOD_NOT_FOUND
    assert with_id[5]["error"]["code"] == INVALID_PARAMS
    assert with_id[6]["result"]["isError"] is True
    # The bad-version entry answers -32600 (with its id or null); the bare 42 answers -32600 with id null.
    invalid = [r for r in body if r.get("error", {}).get("code") == INVALID_REQUEST]
    assert len(invalid) == 2, body
    assert len(null_id) >= 1 and all(r["error"]["code"] == INVALID_REQUEST for r in null_id)


def test_all_notification_batch_is_202(client: httpx.Client) -> None:
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    ]
    response = post(client, batch)
    assert response.status_code == 202, response.text
    assert response.content == b""


def test_empty_batch_is_single_invalid_request(client: httpx.Client) -> None:
    body = assert_json_answer(post(client, []))
    assert not isinstance(body, list), body
    assert_error_object(body, INVALID_REQUEST, None)


# ---- HTTP method, Accept, Content-Type ---------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405_with_allow_post(client: httpx.Client, method: str) -> None:
    response = client.request(method, "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": "x"})
    assert response.status_code == 405, response.text
    assert response.headers["allow"].replace(" ", "").upper().split(",") == ["POST"]


@pytest.mark.parametrize(
    "accept",
    [None, "application/json", "application/json, text/event-stream", "text/event-stream, application/json", "*/*"],
    ids=["missing", "json-only", "json-and-sse", "sse-and-json", "any"],
)
def test_lenient_accept_answers_json(client: httpx.Client, accept: str | None) -> None:
    headers = {"Content-Type": "application/json"}
    if accept is not None:
        headers["Accept"] = accept
    response = post_raw(client, json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}), headers)
    assert ("accept" in response.request.headers) is (accept is not None)
    body = assert_json_answer(response)
    assert body["id"] == 9 and "tools" in body["result"]


def test_error_answers_are_json_too(client: httpx.Client) -> None:
    response = post_raw(client, b"nope", {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    assert_error_object(assert_json_answer(response), PARSE_ERROR, None)


# ---- body size ---------------------------------------------------------------------------------
def _ping_of_size(size: int) -> bytes:
    head = b'{"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"_pad": "'
    tail = b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def test_body_just_under_limit_is_served(client: httpx.Client) -> None:
    raw = _ping_of_size(DEFAULT_MAX_BODY_BYTES - 16)
    body = assert_json_answer(post_raw(client, raw))
    assert body == {"jsonrpc": "2.0", "id": "big", "result": {}}


def test_oversized_body_is_413_and_server_keeps_serving(client: httpx.Client) -> None:
    raw = _ping_of_size(DEFAULT_MAX_BODY_BYTES + 1024)
    response = post_raw(client, raw)
    assert response.status_code == 413, response.text[:300]
    assert_server_alive(client)


def test_oversized_chunked_body_without_content_length_is_413(client: httpx.Client) -> None:
    raw = _ping_of_size(DEFAULT_MAX_BODY_BYTES + 1024)

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(raw), 64 * 1024):
            yield raw[i : i + 64 * 1024]

    response = client.post("/mcp", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in response.request.headers
    assert response.status_code == 413, response.text[:300]
    assert_server_alive(client)
