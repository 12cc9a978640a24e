"""MCP 2026-07-28 (the stateless revision) on POST /mcp, in process over the fake backend.

Each rule is one a 2026-07-28 client or the conformance suite relies on: discovery instead of the
handshake, `_meta` on every request, routing headers that must agree with the body, the version
check, and the era's HTTP statuses. The handshake era must not change when the header is absent.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from mcp_classifier.settings import Settings

VERSION = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
HANDSHAKE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
CLASSIFY = {"name": "classify_text", "arguments": {"text": "what is the integral of x squared"}}


def post(
    client: httpx.Client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    meta: dict[str, Any] | None = META,
    headers: list[tuple[str, str]] | None = None,
    request_id: int | None = 7,
) -> httpx.Response:
    """A conformant 2026-07-28 request unless told otherwise: _meta in params, headers that repeat the body."""
    body_params = dict(params or {})
    if meta is not None:
        body_params["_meta"] = meta
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": body_params}
    if request_id is not None:
        body["id"] = request_id
    if headers is None:
        headers = [("MCP-Protocol-Version", VERSION), ("Mcp-Method", method)]
        if method == "tools/call":
            headers.append(("Mcp-Name", body_params["name"]))
    return client.post("/mcp", json=body, headers=headers)


def error_of(response: httpx.Response, status: int, code: int, request_id: int | None = 7) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["id"] == request_id and body["error"]["code"] == code, body
    return body["error"]


# ---- what a 2026-07-28 client gets ---------------------------------------------------------------
def test_server_discover_replaces_the_handshake(client: httpx.Client) -> None:
    response = post(client, "server/discover")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["supportedVersions"][0] == VERSION and set(HANDSHAKE_VERSIONS) <= set(result["supportedVersions"])
    assert set(result["capabilities"]) == {"tools", "resources", "prompts"}
    assert "classify_text" in result["instructions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-classifier"
    assert result["resultType"] == "complete"
    assert (result["ttlMs"], result["cacheScope"]) == (Settings().serving.list_ttl_ms, "public")


def test_tools_list_and_call_carry_the_eras_result_fields(client: httpx.Client) -> None:
    listed = post(client, "tools/list").json()["result"]
    assert {"list_categories", "classify_text"} <= {t["name"] for t in listed["tools"]}
    assert all(t["inputSchema"]["type"] == "object" and t["description"] for t in listed["tools"])
    assert listed["resultType"] == "complete" and listed["ttlMs"] == Settings().serving.list_ttl_ms and listed["cacheScope"] == "public"
    called = post(client, "tools/call", CLASSIFY).json()["result"]
    assert called["isError"] is False and called["resultType"] == "complete"
    assert called["structuredContent"]["category"]
    assert "ttlMs" not in called and "cacheScope" not in called  # a classification is not a list to cache
    assert called["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-classifier"


@pytest.mark.parametrize(
    ("method", "key"), [("prompts/list", "prompts"), ("resources/list", "resources"), ("resources/templates/list", "resourceTemplates")]
)
def test_declared_lists_answer_empty_and_cacheable(client: httpx.Client, method: str, key: str) -> None:
    result = post(client, method).json()["result"]
    assert result[key] == [] and result["ttlMs"] >= 0 and result["cacheScope"] == "public"


def test_client_info_is_optional_and_an_incoming_session_id_is_ignored(client: httpx.Client) -> None:
    headers = [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/list"), ("Mcp-Session-Id", "from-an-old-client")]
    response = post(client, "tools/list", headers=headers)
    assert response.status_code == 200 and "mcp-session-id" not in response.headers


# ---- the per-request _meta -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "meta",
    [None, {}, {"io.modelcontextprotocol/clientCapabilities": {}}, {"io.modelcontextprotocol/protocolVersion": VERSION}],
    ids=["no _meta", "empty _meta", "no protocol version", "no client capabilities"],
)
def test_a_request_without_its_envelope_gets_invalid_params_and_400(client: httpx.Client, meta: dict[str, Any] | None) -> None:
    error = error_of(post(client, "server/discover", meta=meta), 400, -32602)
    assert "_meta" in error["message"]


# ---- routing headers against the body ------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        [("MCP-Protocol-Version", VERSION)],
        [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "prompts/list")],
        [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "TOOLS/LIST")],
        [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/list"), ("Mcp-Method", "tools/list")],
    ],
    ids=["Mcp-Method missing", "Mcp-Method differs", "Mcp-Method differs in case", "Mcp-Method sent twice"],
)
def test_a_method_header_that_disagrees_with_the_body_gets_32020(client: httpx.Client, headers: list[tuple[str, str]]) -> None:
    error_of(post(client, "tools/list", headers=headers), 400, -32020)


@pytest.mark.parametrize("name_header", [None, "wrong_tool_name"], ids=["Mcp-Name missing", "Mcp-Name differs"])
def test_tools_call_needs_an_mcp_name_equal_to_the_tool(client: httpx.Client, name_header: str | None) -> None:
    headers = [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/call")]
    if name_header is not None:
        headers.append(("Mcp-Name", name_header))
    error_of(post(client, "tools/call", CLASSIFY, headers=headers), 400, -32020)


@pytest.mark.parametrize(
    "name_header",
    ["  classify_text  ", "=?base64?" + base64.b64encode(b"classify_text").decode() + "?="],
    ids=["padded with whitespace", "base64 form"],
)
def test_mcp_name_is_compared_after_trimming_and_base64_decoding(client: httpx.Client, name_header: str) -> None:
    headers = [("MCP-Protocol-Version", VERSION), ("mcp-method", "tools/call"), ("MCP-NAME", name_header)]  # names: any case
    response = post(client, "tools/call", CLASSIFY, headers=headers)
    assert response.status_code == 200 and response.json()["result"]["isError"] is False


def test_a_header_version_that_disagrees_with_the_body_gets_32020_before_the_version_check(client: httpx.Client) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    error_of(post(client, "server/discover", meta=meta), 400, -32020)


def test_an_unsupported_version_gets_32022_naming_the_supported_ones(client: httpx.Client) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    headers = [("MCP-Protocol-Version", "v999.0.0"), ("Mcp-Method", "server/discover")]
    error = error_of(post(client, "server/discover", meta=meta, headers=headers), 400, -32022)
    discovered = post(client, "server/discover").json()["result"]["supportedVersions"]
    assert error["data"]["requested"] == "v999.0.0" and error["data"]["supported"] and set(error["data"]["supported"]) <= set(discovered)


# ---- methods of the handshake era, unknown methods, envelopes -------------------------------------
@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"]
)
def test_removed_and_unknown_methods_get_32601_with_404(client: httpx.Client, method: str) -> None:
    error = error_of(post(client, method), 404, -32601)
    assert error["data"]["method"] == method and len(error["data"]["eventId"]) == 32


def test_envelope_errors_keep_their_codes_with_400(client: httpx.Client) -> None:
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list", "Content-Type": "application/json"}
    parse = client.post("/mcp", content=b"{not json", headers=headers)
    assert parse.status_code == 400 and parse.json()["error"]["code"] == -32700
    batch = client.post("/mcp", json=[{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}], headers=headers)
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600


def test_a_notification_is_accepted_without_a_body(client: httpx.Client) -> None:
    response = post(client, "notifications/cancelled", {"requestId": 3}, request_id=None)
    assert response.status_code == 202 and response.content == b""


def test_an_unknown_tool_is_invalid_params(client: httpx.Client) -> None:
    headers = [("MCP-Protocol-Version", VERSION), ("Mcp-Method", "tools/call"), ("Mcp-Name", "no_such_tool")]
    error_of(post(client, "tools/call", {"name": "no_such_tool", "arguments": {}}, headers=headers), 400, -32602)


# ---- the handshake era is unchanged ----------------------------------------------------------------
@pytest.mark.parametrize("version_header", [None, "2025-06-18"], ids=["no header", "a handshake version"])
def test_without_the_2026_header_the_handshake_era_answers(client: httpx.Client, version_header: str | None) -> None:
    headers = {} if version_header is None else {"MCP-Protocol-Version": version_header}
    initialize = client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}, headers=headers
    )
    assert initialize.status_code == 200 and initialize.json()["result"]["protocolVersion"] == "2025-06-18"
    unknown = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "server/discover"}, headers=headers)
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601  # never 404 in the handshake era
    listed = client.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers).json()["result"]
    assert "resultType" not in listed and "ttlMs" not in listed
