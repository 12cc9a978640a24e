"""The gateway's edge (docs/security.md, "The edge") in process: allowlists and keys as rules, then the real app behind the
real edge guard over a fake backend: auth on every route, 403s, body and text limits, bad JSON.

tests/e2e/test_edge.py runs the route-level tests again against real gateway processes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_classifier.edge import build_edge_guard
from mcp_classifier.edge.keys import ApiKeys, parse_keys_file
from mcp_classifier.edge.origins import Allowlist, hosts_allowlist
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.route_labels import route_label
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import API_KEY_IN_FILE, DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

KEYS_ENV = "alpha-key-7f3e,beta-key-91c2"
FILE_KEY = API_KEY_IN_FILE
WRONG_KEY = "not-a-key"

REST_CALLS: dict[str, dict[str, Any]] = {
    "initialize": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    "tools/list": {},
    "tools/call": {"name": "classify_text", "arguments": {"text": "What is 2 + 2?"}},
    "resources/list": {},
    "prompts/list": {},
    "ping": {},
}
# (method, path, body, status when authorised)
PROTECTED_ROUTES: list[tuple[str, str, Any, int]] = [
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, 200),
    ("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, 202),
    ("GET", "/mcp", None, 405),
    ("DELETE", "/mcp", None, 405),
    *[("POST", f"/mcp/{m}", body, 200) for m, body in REST_CALLS.items()],
    ("POST", "/mcp/no-such-method", {}, 404),
    ("POST", "/v1/tools/filter", {"query": "will it rain", "tools": [{"name": "weather", "description": "forecast"}]}, 200),
    ("POST", "/v1/tools/feedback", {"query": "will it rain", "called": [{"name": "weather"}]}, 404),  # tool_feedback off
    ("POST", "/classify", {"inputs": "What is 2 + 2?"}, 200),
    ("GET", "/openapi.json", None, 200),
    ("GET", "/no-such-path", None, 404),
]
OPEN_ROUTES = ["/health", "/ready", "/metrics"]


def request(client: httpx.Client, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = None if body is None else json.dumps(body)
    return client.request(method, path, content=content, headers={"Content-Type": "application/json", **(headers or {})})


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ---- allowlists and keys -----------------------------------------------------------------------------
def test_origin_allowlist_rules() -> None:
    default = Allowlist("localhost,127.0.0.1,[::1]")
    for ok in ["http://localhost:3000", "https://localhost", "http://127.0.0.1:6274", "http://[::1]:8080", "HTTP://LOCALHOST:1"]:
        assert default.origin_allowed(ok), ok
    for bad in ["http://evil.example.com", "http://localhost.evil.com", "null", "file://", "http://127.0.0.2", "localhost", ""]:
        assert not default.origin_allowed(bad), bad
    custom = Allowlist("https://app.example.com, http://*.corp.example:8443")
    assert custom.origin_allowed("https://app.example.com") and custom.origin_allowed("https://app.example.com:443")
    assert not custom.origin_allowed("http://app.example.com")  # scheme given: it must match
    assert custom.origin_allowed("http://ui.corp.example:8443") and not custom.origin_allowed("http://ui.corp.example:9000")
    assert Allowlist("*").origin_allowed("http://anything.example")


def test_host_allowlist_auto_follows_the_bind_address() -> None:
    loopback = hosts_allowlist("auto", "127.0.0.1")
    for ok in ["127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:9"]:
        assert loopback.host_allowed(ok), ok
    for bad in ["evil.example.com", "evil.example.com:8080", "", None, "127.0.0.1.nip.io"]:
        assert not loopback.host_allowed(bad), bad
    assert hosts_allowlist("auto", "0.0.0.0").host_allowed("mcp-classifier.default.svc.cluster.local:8080")
    listed = hosts_allowlist("*.svc.cluster.local,gateway.example.com:443", "0.0.0.0")
    assert listed.host_allowed("mcp.ns.svc.cluster.local:8080") and listed.host_allowed("gateway.example.com:443")
    assert not listed.host_allowed("gateway.example.com:80") and not listed.host_allowed("other.example.com")


def test_api_keys_from_setting_and_file(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# rotated 2026-11\n\n  {FILE_KEY}  \n# old-key\n")
    assert parse_keys_file(keys_file.read_text()) == [FILE_KEY]
    keys = ApiKeys(KEYS_ENV, keys_file)
    assert keys.enabled and keys.count == 3
    assert keys.verify("alpha-key-7f3e") and keys.verify("beta-key-91c2") and keys.verify(FILE_KEY)
    assert not keys.verify(WRONG_KEY) and not keys.verify("") and not keys.verify("old-key") and not keys.verify("alpha-key-7f3")
    assert not ApiKeys(None, None).enabled
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(OSError, match="holds no keys"):
        ApiKeys(None, empty)
    with pytest.raises(OSError, match="cannot read"):
        ApiKeys(None, tmp_path / "missing")


# ---- auth on every route: the real app behind the edge guard, as `serve` wires it ------------------
@pytest.fixture(scope="module")
def auth_client(keys_file: Path) -> Iterator[httpx.Client]:
    settings = Settings(api_keys=KEYS_ENV, api_keys_file=keys_file, host="127.0.0.1")
    metrics = GatewayMetrics()
    guard = build_edge_guard(settings.edge, metrics, host=settings.serving.host, link=None, redis_metrics=None, route_label=route_label)
    backend = FakeBackend()
    tool_filter = build_tool_filter(settings, backend)
    app = gateway_app(
        build_dispatcher(settings, backend, tool_filter),
        backend,
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
        metrics=metrics,
        edge=guard,
        tool_filter=tool_filter,
    )
    with asgi_client(app) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path", "body", "authorised_status"),
    PROTECTED_ROUTES,
    ids=[f"{m} {p} {i}" for i, (m, p, _, _) in enumerate(PROTECTED_ROUTES)],
)
def test_missing_wrong_and_right_key_on_every_route(
    auth_client: httpx.Client, method: str, path: str, body: Any, authorised_status: int
) -> None:
    missing = request(auth_client, method, path, body)
    assert missing.status_code == 401, missing.text
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "error" in missing.json()

    for bad in (
        bearer(WRONG_KEY),
        {"Authorization": "Basic YWxwaGE6a2V5"},
        {"Authorization": "Bearer"},
        {"Authorization": "alpha-key-7f3e"},
    ):
        wrong = request(auth_client, method, path, body, bad)
        assert wrong.status_code == 401, (bad, wrong.text)
        assert wrong.headers["www-authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in request(auth_client, method, path, body, bearer(WRONG_KEY)).headers["www-authenticate"]

    for key in ("alpha-key-7f3e", "beta-key-91c2", FILE_KEY):
        right = request(auth_client, method, path, body, bearer(key))
        assert right.status_code == authorised_status, (key, right.text)
    if path == "/mcp/tools/call":
        result = request(auth_client, method, path, body, {"Authorization": "bearer alpha-key-7f3e"}).json()  # scheme is case-insensitive
        assert result["isError"] is False


@pytest.mark.parametrize("path", OPEN_ROUTES)
def test_health_ready_and_metrics_stay_open(auth_client: httpx.Client, path: str) -> None:
    assert auth_client.get(path).status_code == 200
    assert auth_client.get(path, headers=bearer(WRONG_KEY)).status_code == 200


def test_bad_origin_and_host_are_403(auth_client: httpx.Client) -> None:
    key = bearer("alpha-key-7f3e")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for origin in ("http://evil.example.com", "null", "http://localhost.evil.example.com"):
        response = request(auth_client, "POST", "/mcp", ping, {**key, "Origin": origin})
        assert response.status_code == 403 and "Origin" in response.json()["error"], (origin, response.text)
    # The conformance suite's DNS-rebinding probe: Host and Origin both set to the attacker's name.
    rebinding = request(auth_client, "POST", "/mcp", ping, {**key, "Host": "evil.example.com", "Origin": "http://evil.example.com"})
    assert rebinding.status_code == 403
    assert request(auth_client, "POST", "/mcp/ping", {}, {**key, "Host": "evil.example.com"}).status_code == 403
    # Unauthenticated requests from a bad origin are refused before the key is even looked at.
    assert request(auth_client, "POST", "/mcp", ping, {"Origin": "http://evil.example.com"}).status_code == 403
    for origin in ("http://localhost:6274", "http://127.0.0.1:3000", "https://[::1]"):
        assert request(auth_client, "POST", "/mcp", ping, {**key, "Origin": origin}).status_code == 200, origin
    assert request(auth_client, "POST", "/mcp", ping, {**key, "Host": "localhost"}).status_code == 200
    assert auth_client.get("/health", headers={"Origin": "http://evil.example.com"}).status_code == 200


# ---- bad input gets a clear error and the server keeps serving ---------------------------------------
def _alive(client: httpx.Client) -> None:
    assert request(client, "POST", "/mcp", {"jsonrpc": "2.0", "id": "alive", "method": "ping"}).json()["result"] == {}
    response = request(client, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": "still there?"}})
    assert response.status_code == 200 and response.json()["isError"] is False


def test_oversized_text_is_a_tool_error_on_both_styles(client: httpx.Client) -> None:
    text = "x " * 5000  # 10 000 characters > max_text_length (8192)
    rpc = request(
        client,
        "POST",
        "/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": text}}},
    )
    assert rpc.status_code == 200 and rpc.json()["result"]["isError"] is True
    assert "longer than 8192" in json.loads(rpc.json()["result"]["content"][0]["text"])["error"]
    rest = request(client, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": text}})
    assert rest.status_code == 200 and rest.json()["isError"] is True
    _alive(client)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/tools/call", "/mcp/ping"])
def test_oversized_body_is_413_on_every_post_route(client: httpx.Client, path: str) -> None:
    body = b'{"name": "classify_text", "arguments": {"text": "' + b"y" * (1_048_576 + 10) + b'"}}'
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:200]
    assert "exceeds" in json.dumps(response.json())
    _alive(client)


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000], ids=["arrays", "objects"])
def test_deeply_nested_json_on_rest_routes_is_400(client: httpx.Client, raw: bytes) -> None:
    response = client.post("/mcp/tools/call", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]
    rpc = client.post("/mcp", content=raw, headers={"Content-Type": "application/json"})
    assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700
    _alive(client)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "classify_text", "arguments": {"text": "caf\xe9 \xff\xfe"}}',  # invalid UTF-8 bytes
        b'{"name": "classify_text", "arguments": {"text": "\\ud800 lone surrogate"}}',  # valid JSON escape, not Unicode
    ],
    ids=["bytes", "lone-surrogate"],
)
def test_invalid_utf8_is_a_clear_error_on_both_styles(client: httpx.Client, raw: bytes) -> None:
    rest = client.post("/mcp/tools/call", content=raw, headers={"Content-Type": "application/json"})
    assert rest.status_code == 400 and "not valid JSON" in rest.json()["error"], rest.text
    envelope = b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": ' + raw + b"}"
    rpc = client.post("/mcp", content=envelope, headers={"Content-Type": "application/json"})
    assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700 and rpc.json()["id"] is None
    _alive(client)
