"""REST style `POST /mcp/<method>` (docs/protocol.md, "REST style"): every mapping rule, in process over a fake backend.

tests/e2e/test_http_real_model.py runs the Go client's sequence and a few others of these same
tests over real HTTP against a real gateway process with the real model.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support import DEFAULT_MAX_BODY_BYTES, assert_valid_classification

GO_CLIENT_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def send_exact(client: httpx.Client, path: str, content: bytes, headers: dict[str, str]) -> httpx.Response:
    """Send with exactly ``headers``: building the Request ourselves skips httpx's client defaults
    (User-Agent, Accept-Encoding, Connection...); only Host and Content-Length are added, as HTTP/1.1 needs."""
    request = httpx.Request("POST", client.base_url.join(path), content=content, headers=headers)
    assert {k.lower() for k in request.headers.keys()} == {"host", "content-length"} | {k.lower() for k in headers}, request.headers
    return client.send(request)


def rest(client: httpx.Client, method: str, body: Any = None, *, raw: bytes | None = None) -> httpx.Response:
    content = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    return send_exact(client, f"/mcp/{method}", content, GO_CLIENT_HEADERS)


def ok_json(response: httpx.Response) -> dict[str, Any]:
    assert 200 <= response.status_code < 300, (response.status_code, response.text)
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    body = response.json()
    assert isinstance(body, dict), body
    # A bare result object, never a JSON-RPC envelope.
    assert "jsonrpc" not in body and "result" not in body and "error" not in body, body
    return body


def error_json(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    assert "Traceback" not in body["error"]
    return body["error"]


def tool_payload(result: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    assert result["isError"] is is_error, result
    assert result["content"][0]["type"] == "text", result
    payload = json.loads(result["content"][0]["text"])
    if is_error:
        assert isinstance(payload.get("error"), str) and payload["error"], payload
    else:
        assert result["structuredContent"] == payload, result
    return payload


def envelope(params: dict[str, Any]) -> dict[str, Any]:
    """mcp-go's request shape as the Semantic Router's Go client sends it: no jsonrpc, no id, empty method."""
    return {"method": "", "params": params}


# ---- the vLLM Semantic Router Go client, replayed in order --------------------------------------
def test_semantic_router_go_client_sequence(client: httpx.Client, category_count: int) -> None:
    # 1. initialize
    response = rest(
        client,
        "initialize",
        envelope(
            {
                "protocolVersion": "2024-11-05",
                "capabilities": {"roots": {"listChanged": False}, "sampling": {}},
                "clientInfo": {"name": "semantic-router", "version": "1.0.0"},
            }
        ),
    )
    assert "mcp-session-id" not in response.headers  # stateless: nothing for the client to carry
    init = ok_json(response)
    assert init["protocolVersion"] == "2024-11-05"
    assert init["serverInfo"]["name"] and init["serverInfo"]["version"]
    assert "tools" in init["capabilities"]

    # 2. tools/list
    tools = ok_json(rest(client, "tools/list", envelope({})))
    names = {t["name"] for t in tools["tools"]}
    assert {"list_categories", "classify_text"} <= names
    assert "nextCursor" not in tools

    # 3. resources/list and 4. prompts/list: empty lists, not errors.
    assert ok_json(rest(client, "resources/list", envelope({}))) == {"resources": []}
    assert ok_json(rest(client, "prompts/list", envelope({}))) == {"prompts": []}

    # 5. tools/call list_categories
    cats = tool_payload(ok_json(rest(client, "tools/call", envelope({"name": "list_categories", "arguments": {}}))), is_error=False)
    assert len(cats["categories"]) == category_count
    assert set(cats["category_system_prompts"]) == set(cats["categories"])
    assert set(cats["category_descriptions"]) == set(cats["categories"])

    # 6. tools/call classify_text with probabilities
    result = ok_json(
        rest(
            client,
            "tools/call",
            envelope({"name": "classify_text", "arguments": {"text": "What is the derivative of sin(x)?", "with_probabilities": True}}),
        )
    )
    payload = tool_payload(result, is_error=False)
    assert_valid_classification(payload, category_count)
    assert len(payload["probabilities"]) == category_count
    if "category" in payload:
        assert payload["category"] == cats["categories"][payload["class"]]


def test_go_client_envelope_without_params_key(client: httpx.Client) -> None:
    # mcp-go omits empty params (`omitempty`): {"method": ""} alone must still work.
    tools = ok_json(rest(client, "tools/list", {"method": ""}))
    assert {"list_categories", "classify_text"} <= {t["name"] for t in tools["tools"]}


# ---- the seed's plain form and bodies without an envelope --------------------------------------
def test_plain_tools_call_classify_text(client: httpx.Client, category_count: int) -> None:
    result = ok_json(rest(client, "tools/call", {"name": "classify_text", "arguments": {"text": "When did the Roman Empire fall?"}}))
    payload = tool_payload(result, is_error=False)
    assert_valid_classification(payload, category_count)
    assert "probabilities" not in payload


def test_plain_tools_call_with_probabilities(client: httpx.Client, category_count: int) -> None:
    result = ok_json(
        rest(
            client,
            "tools/call",
            {"name": "classify_text", "arguments": {"text": "How does photosynthesis work?", "with_probabilities": True}},
        )
    )
    payload = tool_payload(result, is_error=False)
    assert_valid_classification(payload, category_count)
    assert len(payload["probabilities"]) == category_count


def test_plain_initialize_params_body(client: httpx.Client) -> None:
    init = ok_json(
        rest(client, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}})
    )
    assert init["protocolVersion"] == "2025-03-26"
    assert isinstance(init["instructions"], str) and init["instructions"]


def test_ping_with_empty_object(client: httpx.Client) -> None:
    assert ok_json(rest(client, "ping", {})) == {}


@pytest.mark.parametrize("raw", [b"", b"  \n"], ids=["empty", "whitespace"])
def test_empty_body_works(client: httpx.Client, raw: bytes) -> None:
    assert ok_json(rest(client, "ping", raw=raw)) == {}
    tools = ok_json(rest(client, "tools/list", raw=raw))
    assert {"list_categories", "classify_text"} <= {t["name"] for t in tools["tools"]}
    assert ok_json(rest(client, "resources/list", raw=raw)) == {"resources": []}


def test_rest_works_with_default_httpx_headers(client: httpx.Client) -> None:
    # A plain client (any Accept, its own User-Agent) gets the same bare result.
    response = client.post("/mcp/ping", json={})
    assert ok_json(response) == {}


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["no_such_method", "tools/unknown", "server/discover", "logging/nope"])
def test_unknown_rest_method_is_404_json(client: httpx.Client, method: str) -> None:
    error_json(rest(client, method, {}), 404)


@pytest.mark.parametrize(
    "raw", [b"{not json", b'{"name": "classify_text",}', b"\xff\xfe"], ids=["garbage", "trailing-comma", "invalid-utf8"]
)
def test_bad_json_is_400(client: httpx.Client, raw: bytes) -> None:
    error_json(rest(client, "tools/call", raw=raw), 400)


def test_unknown_tool_is_400(client: httpx.Client) -> None:
    message = error_json(rest(client, "tools/call", {"name": "no_such_tool", "arguments": {}}), 400)
    assert "no_such_tool" in message


def test_unknown_tool_in_envelope_is_400(client: httpx.Client) -> None:
    error_json(rest(client, "tools/call", envelope({"name": "no_such_tool", "arguments": {}})), 400)


def test_tools_call_without_name_is_400(client: httpx.Client) -> None:
    error_json(rest(client, "tools/call", {"arguments": {"text": "hi"}}), 400)


@pytest.mark.parametrize("body", [[1, 2], 42, "text", [{"name": "classify_text"}]], ids=["array", "number", "string", "array-of-object"])
def test_body_not_an_object_is_400(client: httpx.Client, body: Any) -> None:
    error_json(rest(client, "tools/call", body), 400)


def test_envelope_params_not_an_object_is_400(client: httpx.Client) -> None:
    error_json(rest(client, "tools/call", {"method": "", "params": ["classify_text"]}), 400)


def test_oversized_body_is_413_and_server_keeps_serving(client: httpx.Client) -> None:
    head = b'{"name": "classify_text", "arguments": {"text": "'
    tail = b'"}}'
    raw = head + b"a" * (DEFAULT_MAX_BODY_BYTES + 1024 - len(head) - len(tail)) + tail
    error_json(rest(client, "tools/call", raw=raw), 413)
    assert ok_json(rest(client, "ping", {})) == {}


@pytest.mark.parametrize(
    "arguments",
    [{"text": ""}, {"text": "   "}, {"text": "hi", "unexpected": 1}, {}],
    ids=["empty", "whitespace", "unknown-argument", "missing-text"],
)
def test_tool_level_problem_is_200_with_is_error(client: httpx.Client, arguments: dict[str, Any]) -> None:
    result = ok_json(rest(client, "tools/call", {"name": "classify_text", "arguments": arguments}))
    tool_payload(result, is_error=True)


def test_tool_level_problem_in_envelope_is_200_with_is_error(client: httpx.Client) -> None:
    result = ok_json(rest(client, "tools/call", envelope({"name": "classify_text", "arguments": {"text": ""}})))
    tool_payload(result, is_error=True)


def test_text_too_long_is_200_with_is_error(client: httpx.Client) -> None:
    tools = ok_json(rest(client, "tools/list", {}))
    max_len = next(t for t in tools["tools"] if t["name"] == "classify_text")["inputSchema"]["properties"]["text"]["maxLength"]
    result = ok_json(rest(client, "tools/call", {"name": "classify_text", "arguments": {"text": "b" * (max_len + 1)}}))
    payload = tool_payload(result, is_error=True)
    assert str(max_len) in payload["error"]


# ---- a base URL with a trailing slash -----------------------------------------------------------
@pytest.mark.parametrize("base", ["/mcp/", "/mcp//"])
def test_semantic_router_rest_style_works_with_a_trailing_slash_base(client: httpx.Client, base: str, category_count: int) -> None:
    """The Go client joins base and method with '/': a base of /mcp/ calls /mcp//initialize."""
    init = ok_json(client.post(f"{base}/initialize", json=envelope({"protocolVersion": "2024-11-05", "capabilities": {}})))
    assert init["serverInfo"]["name"] == "mcp-classifier"
    result = ok_json(client.post(f"{base}/tools/call", json=envelope({"name": "classify_text", "arguments": {"text": "What is 2+2?"}})))
    assert_valid_classification(tool_payload(result, is_error=False), category_count)


def test_json_rpc_at_mcp_with_a_trailing_slash_is_the_same_door() -> None:
    from mcp_classifier.transports.mcp_paths import canonical_mcp_path

    assert canonical_mcp_path("/mcp/") == "/mcp"
    assert canonical_mcp_path("/mcp//tools/list/") == "/mcp/tools/list"
    assert canonical_mcp_path("/health") == "/health" and canonical_mcp_path("/mcpx//a") == "/mcpx//a"


def test_json_rpc_posted_to_mcp_slash_is_answered(client: httpx.Client) -> None:
    answer = client.post("/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert answer.status_code == 200 and answer.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
