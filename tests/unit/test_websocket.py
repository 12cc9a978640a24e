"""MCP over WebSocket at /ws, in process (Starlette's test client) over the fake backend.

What a WebSocket client relies on: the same messages as HTTP, answered in kind when sent without
"jsonrpc", the `mcp` subprotocol, HTTP's auth and Origin rules, one session id per connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.edge.middleware import EdgeGuard
from mcp_classifier.edge.origins import Allowlist
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.wiring import build_dispatcher
from tests.support.asgi_client import TRACE_META_KEY
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

KEY = {"Authorization": "Bearer ws-key"}  # copied per call: the test client adds its handshake headers to the dict it is given
MAX_MESSAGE = 4096


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    backend = FakeBackend()
    metrics = GatewayMetrics()
    guard = EdgeGuard(keys=ApiKeys("ws-key", None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=None, metrics=metrics)
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=MAX_MESSAGE, metrics=metrics, edge=guard)
    with TestClient(app) as http:
        yield http


def exchange(socket: Any, message: Any) -> Any:
    socket.send_text(json.dumps(message))
    return json.loads(socket.receive_text())


def test_tools_list_and_classify_with_and_without_the_jsonrpc_field(client: TestClient) -> None:
    with client.websocket_connect("/ws", headers=dict(KEY), subprotocols=["mcp"]) as socket:
        assert socket.accepted_subprotocol == "mcp"
        listed = exchange(socket, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert listed["jsonrpc"] == "2.0" and "classify_text" in {t["name"] for t in listed["result"]["tools"]}
        bare = exchange(
            socket, {"id": "b", "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": "solve 2x+1=5"}}}
        )
        assert "jsonrpc" not in bare and bare["id"] == "b"
        assert bare["result"]["isError"] is False and "category" in bare["result"]["structuredContent"]
        assert len(bare["result"]["_meta"][TRACE_META_KEY]) == 32
        bare_error = exchange(socket, {"id": 9, "method": "no/such"})
        assert "jsonrpc" not in bare_error and bare_error["error"]["code"] == -32601 and bare_error["error"]["data"]["eventId"]


def test_batches_notifications_and_garbage_on_one_connection(client: TestClient) -> None:
    with client.websocket_connect("/ws", headers=dict(KEY)) as socket:
        socket.send_text(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))  # owed nothing
        batch = exchange(socket, [{"id": 1, "method": "ping"}, {"id": 2, "method": "tools/list"}])
        assert sorted(a["id"] for a in batch) == [1, 2] and all("jsonrpc" not in a for a in batch)
        assert exchange(socket, "a JSON string")["error"]["code"] == -32600, "valid JSON, but not a request"
        socket.send_text("{not json")
        assert json.loads(socket.receive_text())["error"]["code"] == -32700
        assert exchange(socket, {"jsonrpc": "2.0", "id": 3, "method": "ping"})["id"] == 3, "the connection lives on"


def test_auth_and_origin_rules_are_those_of_http(client: TestClient) -> None:
    """A refused handshake gets HTTP's own answer (status, JSON error, event id), not a bare 403."""
    for headers, status in (({}, 401), ({"Authorization": "Bearer nope"}, 401), ({**KEY, "Origin": "http://evil.example.com"}, 403)):
        with pytest.raises(WebSocketDenialResponse) as refused:
            with client.websocket_connect("/ws", headers=headers):
                pass
        assert refused.value.status_code == status
        assert refused.value.json()["error"] and len(refused.value.json()["data"]["eventId"]) == 32
    with client.websocket_connect("/ws", headers={**KEY, "Origin": "http://localhost"}) as socket:
        assert exchange(socket, {"jsonrpc": "2.0", "id": 1, "method": "ping"})["id"] == 1


def test_a_foreign_subprotocol_is_refused_at_the_handshake(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    """403 before any session opens (what the docs promise), with the reason and an event id that is in the log."""
    caplog.set_level(logging.INFO)
    with pytest.raises(WebSocketDenialResponse) as refused:
        with client.websocket_connect("/ws", headers=dict(KEY), subprotocols=["graphql-ws"]):
            pass
    assert refused.value.status_code == 403
    body = refused.value.json()
    assert "'mcp' required" in body["error"] and "graphql-ws" in body["error"]
    assert any(getattr(r, "event_id", None) == body["data"]["eventId"] for r in caplog.records)
    assert not [r for r in caplog.records if r.name == "mcp_classifier.access" and getattr(r, "door", None) == "ws"], "no session"
    with client.websocket_connect("/ws", headers=dict(KEY), subprotocols=["graphql-ws", "mcp"]) as socket:
        assert socket.accepted_subprotocol == "mcp"


def test_without_the_denial_extension_a_foreign_subprotocol_is_closed_before_accept() -> None:
    """A server that cannot answer a handshake itself gets a close before accept (it answers 403), code 1002."""
    backend = FakeBackend()
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=MAX_MESSAGE)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/ws", "raw_path": b"/ws", "query_string": b"", "headers": [], "subprotocols": ["graphql-ws"]}
    asyncio.run(app(scope, receive, send))
    assert [m["type"] for m in sent] == ["websocket.close"] and sent[0]["code"] == 1002


def test_an_oversized_message_closes_with_1009(client: TestClient) -> None:
    with client.websocket_connect("/ws", headers=dict(KEY)) as socket:
        socket.send_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * MAX_MESSAGE}}))
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_text()
        assert closed.value.code == 1009


def test_one_session_id_per_connection_in_the_log_lines(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcp_classifier.access")
    sessions = []
    for _ in range(2):
        with client.websocket_connect("/ws", headers=dict(KEY)) as socket:
            for i in range(2):
                exchange(socket, {"id": i, "method": "ping"})
        lines = [r for r in caplog.records if r.name == "mcp_classifier.access" and r.door == "ws"]
        sessions.append({r.session_id for r in lines[-2:]})
        assert all(r.method == "ping" and r.outcome == "ok" for r in lines[-2:])
    assert all(len(s) == 1 for s in sessions) and sessions[0] != sessions[1]
