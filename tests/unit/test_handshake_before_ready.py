"""Every door answers the handshake while the backend still starts; calls that need the model wait for it.

In process, over the real app and dispatcher, with a fake backend whose start is held open by the test:
the rule is the gateway's (backend.starting), not the model's, so no model is needed to check it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_classifier.backend.starting import StartingBackend
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES, wait_for
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

BASE_URL = "http://127.0.0.1"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "router", "version": "1"}},
}
CLASSIFY = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": "integrate x"}}}


class HeldStartBackend(FakeBackend):
    """A fake whose start() waits until the test releases it (a model that is still loading), or fails."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.fail_start: Exception | None = None

    async def start(self) -> None:
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        if self.fail_start is not None:
            raise self.fail_start
        await super().start()


def _client(inner: HeldStartBackend, wait_s: float) -> Any:
    startup = StartingBackend(inner, wait_s=wait_s)
    ready_lines: list[float | None] = []
    lifecycle = Lifecycle(startup, startup=startup, on_ready=ready_lines.append)
    stopped = threading.Event()
    lifecycle.stop_server = stopped.set
    app = gateway_app(build_dispatcher(Settings(), startup), startup, max_body_bytes=DEFAULT_MAX_BODY_BYTES, lifecycle=lifecycle)
    return asgi_client(app, BASE_URL), lifecycle, ready_lines, stopped


@pytest.fixture
def held() -> Iterator[HeldStartBackend]:
    backend = HeldStartBackend()
    yield backend
    backend.release.set()


def test_handshake_list_and_ping_answer_while_the_model_loads_and_ready_waits(held: HeldStartBackend) -> None:
    context, _, ready_lines, _ = _client(held, wait_s=30.0)
    with context as http:
        answer = http.post("/mcp", json=INITIALIZE).json()
        assert answer["result"]["serverInfo"]["name"] == "mcp-classifier"
        assert http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).json()["result"] == {}
        tools = http.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).json()["result"]["tools"]
        assert "classify_text" in {tool["name"] for tool in tools}
        assert http.get("/ready").status_code == 503
        assert http.get("/health").json()["status"] == "starting"
        assert not held.started and ready_lines == []

        held.release.set()
        assert wait_for(lambda: http.get("/ready").status_code == 200, timeout_s=30)
        assert http.get("/health").json()["status"] == "ok"
        assert len(ready_lines) == 1


def test_a_call_made_while_loading_is_answered_once_the_model_is_ready(held: HeldStartBackend) -> None:
    context, _, _, _ = _client(held, wait_s=30.0)
    with context as http:
        answers: list[dict[str, Any]] = []
        caller = threading.Thread(target=lambda: answers.append(http.post("/mcp", json=CLASSIFY).json()))
        caller.start()
        assert wait_for(lambda: held.calls == [] and caller.is_alive(), timeout_s=1)
        held.release.set()
        caller.join(timeout=30)
        assert answers and answers[0]["result"]["isError"] is False
        assert held.calls == [["integrate x"]]


def test_a_call_that_outwaits_the_deadline_says_the_model_is_still_loading(held: HeldStartBackend) -> None:
    context, _, _, _ = _client(held, wait_s=0.2)
    with context as http:
        answer = http.post("/mcp", json=CLASSIFY)
        error = answer.json()["error"]
        assert error["data"]["kind"] == "unavailable" and "still loading" in error["message"]
        assert held.calls == []


def test_a_failed_start_is_said_by_health_and_calls_and_stops_the_server(held: HeldStartBackend) -> None:
    held.fail_start = RuntimeError("categories file is not valid YAML")
    context, lifecycle, ready_lines, stopped = _client(held, wait_s=30.0)
    with context as http:
        held.release.set()
        assert wait_for(stopped.is_set, timeout_s=30)
        assert "not valid YAML" in str(lifecycle.start_error)
        health = http.get("/health").json()
        assert health["status"] == "failed" and "not valid YAML" in health["error"]
        error = http.post("/mcp", json=CLASSIFY).json()["error"]
        assert "failed to start" in error["message"] and "not valid YAML" in error["message"]
        assert http.get("/ready").status_code == 503 and ready_lines == []


def test_the_stateless_revision_discovers_while_loading(held: HeldStartBackend) -> None:
    context, _, _, _ = _client(held, wait_s=30.0)
    with context as http:
        answer = http.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "server/discover",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
            },
            headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
        )
        assert answer.status_code == 200, answer.text
        assert isinstance(answer.json()["result"], dict)
