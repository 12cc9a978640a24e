"""Every refusal carries an event id, in the REST error shape, and that id is in the log.

Not only the error table's kinds: an unknown REST method or path, a wrong HTTP method, the legacy SSE
door's 400/404/413 and the edge's 401/403. A caller who reports any of them gives the id that finds the
log line. In process over the fake backend.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import httpx
import pytest

from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.edge.middleware import EdgeGuard
from mcp_classifier.edge.origins import Allowlist
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.sse import SseSessions, local_sessions
from mcp_classifier.wiring import build_dispatcher
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

MAX_BODY = 4096
KEY = "refusal-key"
OPEN_SESSION = "an-open-session"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def sessions() -> SseSessions:
    return local_sessions(Settings().serving, GatewayMetrics(), MAX_BODY)


@pytest.fixture(scope="module")
def client(sessions: SseSessions) -> Iterator[httpx.Client]:
    backend = FakeBackend()
    metrics = GatewayMetrics()
    guard = EdgeGuard(keys=ApiKeys(KEY, None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=None, metrics=metrics)
    app = gateway_app(
        build_dispatcher(Settings(), backend), backend, max_body_bytes=MAX_BODY, metrics=metrics, edge=guard, sse_sessions=sessions
    )
    with asgi_client(app) as http:
        http.headers["Authorization"] = f"Bearer {KEY}"
        yield http


def assert_refusal(response: httpx.Response, status: int, caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    """The REST error shape with an event id and the trace id; the id is logged, on the request's line too."""
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    data = body["data"]
    assert len(data["eventId"]) == 32 and int(data["eventId"], 16) >= 0
    assert data["traceId"] == response.headers["x-trace-id"]
    logged = [r for r in caplog.records if getattr(r, "event_id", None) == data["eventId"]]
    assert any(r.name == "mcp_classifier.errors" for r in logged), "the refusal is logged under its event id"
    assert any(r.name == "mcp_classifier.access" for r in logged), "the request's log line names it"
    return data


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)


def test_an_unknown_rest_method_is_404_with_an_event_id(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    assert_refusal(client.post("/mcp/no/such/method", json={}), 404, caplog)


def test_an_unknown_path_is_404_with_an_event_id(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    response = client.get("/no-such-path")
    assert_refusal(response, 404, caplog)
    assert "/openapi.json" in response.json()["error"], "it says where the routes are listed"


@pytest.mark.parametrize(("method", "path"), [("GET", "/mcp"), ("DELETE", "/mcp"), ("GET", "/mcp/tools/list"), ("PUT", "/messages")])
def test_a_wrong_http_method_is_405_with_allow_and_an_event_id(
    client: httpx.Client, caplog: pytest.LogCaptureFixture, method: str, path: str
) -> None:
    response = client.request(method, path)
    assert_refusal(response, 405, caplog)
    assert "POST" in response.headers["allow"]


def test_legacy_sse_refusals_carry_event_ids(client: httpx.Client, sessions: SseSessions, caplog: pytest.LogCaptureFixture) -> None:
    assert_refusal(client.post("/messages", json=PING), 400, caplog)
    assert_refusal(client.post("/messages?sessionId=gone", json=PING), 404, caplog)
    sessions.queues[OPEN_SESSION] = asyncio.Queue()  # a stream held by this replica
    try:
        too_big = client.post(f"/messages?sessionId={OPEN_SESSION}", content=b"x" * (MAX_BODY + 1))
        assert_refusal(too_big, 413, caplog)
    finally:
        sessions.queues.pop(OPEN_SESSION, None)


def test_edge_refusals_carry_event_ids(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    assert_refusal(client.post("/mcp", json=PING, headers={"Authorization": "Bearer nope"}), 401, caplog)
    assert_refusal(client.post("/mcp", json=PING, headers={"Origin": "http://evil.example.com"}), 403, caplog)


def test_each_refusal_gets_its_own_event_id(client: httpx.Client) -> None:
    ids = {client.get("/no-such-path").json()["data"]["eventId"] for _ in range(3)}
    assert len(ids) == 3
