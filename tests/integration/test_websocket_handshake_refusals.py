"""A refused WebSocket handshake on a real uvicorn (its default protocol, in process, port 0) over the fake backend.

What a client sees is the server's doing, not the app's: a close before accept reaches it as a bare 403.
With the denial response it gets the real status, the JSON error and the event id; and the refusal,
deliberate, must not show in uvicorn's log as a server error.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.edge.middleware import EdgeGuard
from mcp_classifier.edge.origins import Allowlist
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.wiring import build_dispatcher
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

KEY = "ws-handshake-key"
START_TIMEOUT_S = 10
OPEN_TIMEOUT_S = 10
MCP = Subprotocol("mcp")


@pytest.fixture(scope="module")
def ws_url() -> Iterator[str]:
    backend = FakeBackend()
    metrics = GatewayMetrics()
    guard = EdgeGuard(keys=ApiKeys(KEY, None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=None, metrics=metrics)
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=4096, metrics=metrics, edge=guard)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"ws://127.0.0.1:{port}/ws"
    server.should_exit = True
    thread.join(START_TIMEOUT_S)


def refusal(url: str, headers: dict[str, str], subprotocols: list[Subprotocol]) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as refused:
        with connect(url, additional_headers=headers, subprotocols=subprotocols, open_timeout=OPEN_TIMEOUT_S):
            pass
    return refused.value


def test_a_foreign_subprotocol_gets_403_with_the_reason_and_an_event_id(ws_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refused = refusal(ws_url, {"Authorization": f"Bearer {KEY}"}, [Subprotocol("graphql-ws")])
    assert refused.response.status_code == 403
    body = json.loads(bytes(refused.response.body or b""))
    assert "'mcp' required" in body["error"] and len(body["data"]["eventId"]) == 32
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a deliberate refusal is no server error"


def test_an_edge_refusal_keeps_its_status(ws_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refused = refusal(ws_url, {}, [MCP])
    assert refused.response.status_code == 401 and refused.response.headers["WWW-Authenticate"].startswith("Bearer")
    assert len(json.loads(bytes(refused.response.body or b""))["data"]["eventId"]) == 32
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_the_mcp_subprotocol_is_accepted(ws_url: str) -> None:
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {KEY}"}, subprotocols=[MCP], open_timeout=OPEN_TIMEOUT_S) as socket:
        assert socket.subprotocol == "mcp"
        socket.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        assert json.loads(socket.recv(timeout=OPEN_TIMEOUT_S))["id"] == 1
