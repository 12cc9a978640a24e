"""The gateway's edge (DESIGN §3.2, issue 4): bearer keys, Host/Origin allowlists, a rate limit shared
across replicas through Redis, and bad input — against real gateway processes and real redis-servers."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import fastmcp
import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from mcp_classifier.cache import RedisLink
from mcp_classifier.cache.metrics import RedisMetrics
from mcp_classifier.edge.keys import ApiKeys, parse_keys_file
from mcp_classifier.edge.middleware import EdgeGuard
from mcp_classifier.edge.origins import Allowlist, hosts_allowlist
from mcp_classifier.edge.ratelimit import RateLimiter
from mcp_classifier.protocol.dispatcher import McpDispatcher
from mcp_classifier.protocol.tools import ToolRegistry
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.http import create_app

from .conftest import ServerProcess, assert_valid_classification, start_server
from .redis_server import RedisServer

KEYS_ENV = "alpha-key-7f3e,beta-key-91c2"
FILE_KEY = "gamma-key-from-file-4d1a"
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
]
OPEN_ROUTES = ["/health", "/ready", "/metrics"]


def request(client: httpx.Client, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    content = None if body is None else json.dumps(body)
    return client.request(method, path, content=content, headers={"Content-Type": "application/json", **(headers or {})})


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ---- unit: allowlists and keys ---------------------------------------------------------------------
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


def test_rate_limit_per_client_ip_without_keys(tmp_path: Path) -> None:
    """No keys: the bucket is the client IP (in process, real Redis)."""
    redis = RedisServer(tmp_path).start()

    async def run() -> None:
        metrics = RedisMetrics(CollectorRegistry())
        link = RedisLink(redis.url, timeout_s=1, connect_timeout_s=1, failure_threshold=3, cooldown_s=1, metrics=metrics)
        await link.start()
        guard = EdgeGuard(
            keys=ApiKeys(None, None), hosts=Allowlist("*"), origins=Allowlist("localhost"),
            limiter=RateLimiter(link, limit=3, window_s=30, metrics=metrics), metrics=GatewayMetrics(),
        )
        scope = {"type": "http", "path": "/mcp", "headers": [(b"host", b"x")], "client": ("10.0.0.1", 5555)}
        other = {**scope, "client": ("10.0.0.2", 5555)}
        try:
            answers = [await guard.check(scope) for _ in range(5)]
            assert answers[:3] == [None, None, None]
            status, _, headers = answers[3]  # type: ignore[misc]
            assert status == 429 and 1 <= int(headers["Retry-After"]) <= 30
            assert await guard.check(other) is None  # another IP, another budget
            assert metrics.rate_limited._value.get() == 2
        finally:
            await link.close()

    try:
        asyncio.run(run())
    finally:
        redis.stop()


# ---- HTTP: auth on every route -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "api-keys"
    path.write_text(f"# mounted from a Kubernetes Secret\n\n{FILE_KEY}\n")
    return path


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory, keys_file: Path) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("auth-server"), "--api-keys-file", str(keys_file), "--no-cache",
        env={"MCP_CLASSIFIER_API_KEYS": KEYS_ENV},
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def auth_client(auth_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=auth_server.url, timeout=60) as client:
        yield client


@pytest.mark.parametrize(("method", "path", "body", "authorised_status"), PROTECTED_ROUTES, ids=[f"{m} {p} {i}" for i, (m, p, _, _) in enumerate(PROTECTED_ROUTES)])
def test_missing_wrong_and_right_key_on_every_route(auth_client: httpx.Client, method: str, path: str, body: Any, authorised_status: int) -> None:
    missing = request(auth_client, method, path, body)
    assert missing.status_code == 401, missing.text
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "error" in missing.json()

    for bad in (bearer(WRONG_KEY), {"Authorization": "Basic YWxwaGE6a2V5"}, {"Authorization": "Bearer"}, {"Authorization": "alpha-key-7f3e"}):
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


def test_keys_never_reach_logs_or_health(auth_client: httpx.Client, auth_server: ServerProcess) -> None:
    request(auth_client, "POST", "/mcp/ping", {}, bearer(WRONG_KEY))
    exposed = auth_server.log() + auth_client.get("/health").text + auth_client.get("/metrics").text
    for key in (*KEYS_ENV.split(","), FILE_KEY, WRONG_KEY):
        assert key not in exposed
    assert "3 API key(s)" in auth_server.log()


def test_real_mcp_client_with_a_bearer_key(auth_server: ServerProcess, category_count: int) -> None:
    async def run() -> dict[str, Any]:
        async with fastmcp.Client(f"{auth_server.url}/mcp", auth=FILE_KEY) as client:
            result = await client.call_tool("classify_text", {"text": "Why is the sky blue?", "with_probabilities": True})
        return json.loads(result.content[0].text)

    assert_valid_classification(asyncio.run(run()), category_count)


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


def test_rotating_the_keys_file_takes_effect_without_restart(auth_client: httpx.Client, keys_file: Path) -> None:
    original = keys_file.read_text()
    try:
        keys_file.write_text("delta-key-rotated-5e6f\n")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if request(auth_client, "POST", "/mcp/ping", {}, bearer("delta-key-rotated-5e6f")).status_code == 200:
                break
            time.sleep(0.3)
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer("delta-key-rotated-5e6f")).status_code == 200
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer(FILE_KEY)).status_code == 401
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer("alpha-key-7f3e")).status_code == 200  # env keys stay
    finally:
        keys_file.write_text(original)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and request(auth_client, "POST", "/mcp/ping", {}, bearer(FILE_KEY)).status_code != 200:
            time.sleep(0.3)


def test_open_server_warns_at_start(server: ServerProcess) -> None:
    assert "no API keys configured" in server.log()


# ---- HTTP: two gateways, one Redis, one rate limit ---------------------------------------------------------
def test_two_gateways_sharing_one_redis_enforce_one_rate_limit(tmp_path: Path) -> None:
    limit = 20
    redis = RedisServer(tmp_path).start()
    flags = ("--redis-url", redis.url, "--rate-limit-requests", str(limit), "--rate-limit-window-s", "300", "--api-keys", "rl-key-1,rl-key-2")
    with ThreadPoolExecutor(2) as starter:  # two replicas, started side by side
        gateways = list(starter.map(lambda _: start_server(tmp_path, *flags), range(2)))
    try:
        def call(i: int) -> httpx.Response:
            with httpx.Client(base_url=gateways[i % 2].url, timeout=60) as client:
                return request(client, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": f"rate limit {i % 3}"}}, bearer("rl-key-1"))

        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(call, range(3 * limit)))
        allowed = [r for r in responses if r.status_code == 200]
        limited = [r for r in responses if r.status_code == 429]
        assert len(allowed) + len(limited) == len(responses), {r.status_code for r in responses}
        assert abs(len(allowed) - limit) <= 1, (len(allowed), limit)
        for response in limited:
            assert 1 <= int(response.headers["retry-after"]) <= 300
            assert "rate limit" in response.json()["error"]
        served_by = {g.url: 0 for g in gateways}
        for i, r in enumerate(responses):
            served_by[gateways[i % 2].url] += r.status_code == 200
        assert all(n > 0 for n in served_by.values()), served_by  # both replicas drew on the one budget

        with httpx.Client(base_url=gateways[1].url, timeout=60) as client:
            assert request(client, "POST", "/mcp/ping", {}, bearer("rl-key-2")).status_code == 200  # another key, another budget
            assert client.get("/health").status_code == 200  # open routes are not limited
            assert request(client, "POST", "/mcp/ping", {}, bearer("rl-key-1")).status_code == 429
    finally:
        for gateway in gateways:
            gateway.stop()
        redis.stop()


# ---- HTTP: bad input gets a clear error and the server keeps serving ----------------------------------
@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def _alive(client: httpx.Client) -> None:
    assert request(client, "POST", "/mcp", {"jsonrpc": "2.0", "id": "alive", "method": "ping"}).json()["result"] == {}
    response = request(client, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": "still there?"}})
    assert response.status_code == 200 and response.json()["isError"] is False


def test_oversized_text_is_a_tool_error_on_both_styles(client: httpx.Client) -> None:
    text = "x " * 5000  # 10 000 characters > max_text_length (8192)
    rpc = request(client, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": text}}})
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


def test_websocket_routes_are_behind_the_guard_too() -> None:
    """A transport added later (WebSocket is planned) is covered without new wiring: refused handshakes get 403."""
    class Idle:
        async def start(self) -> None: ...
        async def close(self) -> None: ...
        async def ready(self) -> bool:
            return True

    metrics = GatewayMetrics()
    guard = EdgeGuard(keys=ApiKeys("ws-key", None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=None, metrics=metrics)
    app = create_app(McpDispatcher(ToolRegistry()), Idle(), max_body_bytes=4096, metrics=metrics, edge=guard)  # type: ignore[arg-type]

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text("hello")
        await socket.close()

    with TestClient(app) as client:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Bearer ws-key", "Origin": "http://evil.example.com"}):
            with pytest.raises(WebSocketDisconnect) as refused:
                with client.websocket_connect("/ws", headers=headers):
                    pass
            assert refused.value.code == 1008
        with client.websocket_connect("/ws", headers={"Authorization": "Bearer ws-key"}) as socket:
            assert socket.receive_text() == "hello"
