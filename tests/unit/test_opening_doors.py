"""The HTTP doors from the bind: the handshake answers while the full app is still being built, all else waits for it.

In process, over the real handshake door (dispatcher, edge guard, correlation middlewares) and the real full app
(create_app), with a fake backend: the test holds the full app's build open, as FastAPI's import and the app's
construction hold it at a real start, and checks what each request gets meanwhile and after.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
import pytest

from mcp_classifier.backend.starting import StartingBackend
from mcp_classifier.edge import EdgeMiddleware, build_edge_guard
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.correlated import CorrelationMiddleware
from mcp_classifier.transports.mcp_paths import McpPathMiddleware
from mcp_classifier.transports.opening import FullApp, HandshakeDoor, OpeningApp, handshake_only
from mcp_classifier.transports.route_labels import route_label
from mcp_classifier.util.asgi import ASGIApp
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

API_KEY = "opening-key-5b1d"
AUTHORISED = {"Authorization": f"Bearer {API_KEY}"}
PROTOCOL = "2025-06-18"
STATELESS = "2026-07-28"  # the stateless revision: its version and routing headers on every request, no initialize
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


INITIALIZE = rpc("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "router", "version": "1"}})
CLASSIFY = rpc("tools/call", {"name": "classify_text", "arguments": {"text": "integrate x squared"}}, 3)


def without_trace_id(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer less its request's own trace id (result._meta), which differs on every request."""
    result = dict(answer["result"])
    meta = {key: value for key, value in result.pop("_meta", {}).items() if not key.endswith("/traceId")}
    return {**answer, "result": {**result, "_meta": meta}}


class Doors:
    """An OpeningApp over a full app whose build waits for ``release``; the lifespan driven as uvicorn drives it."""

    def __init__(self, *, wait_s: float = 10.0, fail_build: Exception | None = None) -> None:
        self.settings = Settings(api_keys=API_KEY, host="127.0.0.1")
        self.metrics = GatewayMetrics()
        self.backend = FakeBackend()
        self.startup = StartingBackend(self.backend, wait_s=wait_s)
        self.dispatcher = build_dispatcher(self.settings, self.startup)
        guard = build_edge_guard(
            self.settings.edge, self.metrics, host=self.settings.serving.host, link=None, redis_metrics=None, route_label=route_label
        )
        self.guard = guard
        self.release = asyncio.Event()
        self.builds = 0
        self.failures: list[BaseException] = []
        self.fail_build = fail_build
        door = McpPathMiddleware(
            CorrelationMiddleware(
                EdgeMiddleware(HandshakeDoor(self.dispatcher, self.metrics.observe), guard=guard), self.metrics.observe_door
            )
        )
        self.app = OpeningApp(door, self.build, max_body_bytes=DEFAULT_MAX_BODY_BYTES, wait_s=wait_s, on_failure=self.failures.append)

    async def build(self) -> FullApp:
        self.builds += 1
        await self.release.wait()
        if self.fail_build is not None:
            raise self.fail_build
        lifecycle = Lifecycle(self.startup, startup=self.startup)
        full = gateway_app(
            self.dispatcher,
            self.startup,
            max_body_bytes=DEFAULT_MAX_BODY_BYTES,
            lifecycle=lifecycle,
            metrics=self.metrics,
            edge=self.guard,
        )
        return FullApp(cast(ASGIApp, full), lifecycle.running)

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=("127.0.0.1", 50000))
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


@asynccontextmanager
async def served(doors: Doors) -> AsyncIterator[httpx.AsyncClient]:
    """The ASGI lifespan as uvicorn runs it: startup before the first request, shutdown after the last."""
    to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    from_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    lifespan = asyncio.create_task(doors.app({"type": "lifespan", "asgi": {"version": "3.0"}}, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    assert (await asyncio.wait_for(from_app.get(), 5))["type"] == "lifespan.startup.complete"  # at once: uvicorn binds now
    try:
        async with doors.client() as client:
            yield client
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        assert (await asyncio.wait_for(from_app.get(), 10))["type"] == "lifespan.shutdown.complete"
        await lifespan


def run(scenario: Callable[[], Any]) -> Any:
    return asyncio.run(scenario())


def test_the_handshake_answers_while_the_full_app_is_still_being_built() -> None:
    async def scenario() -> None:
        doors = Doors()
        async with served(doors) as client:
            early = {}
            for message in (INITIALIZE, rpc("tools/list", request_id=2), rpc("ping", request_id=4)):
                answer = await asyncio.wait_for(client.post("/mcp", json=message, headers=AUTHORISED), 5)
                assert answer.status_code == 200, answer.text
                assert "x-trace-id" in answer.headers  # the correlation middleware saw it, as on the full app
                early[message["method"]] = answer.json()
            notified = await client.post("/mcp/", json=rpc("notifications/initialized", request_id=None), headers=AUTHORISED)
            assert notified.status_code == 202 and notified.content == b""
            assert not doors.app.is_open and not doors.backend.started  # all of it before the full app existed
            assert early["initialize"]["result"]["serverInfo"]["name"] == "mcp-classifier"
            assert {tool["name"] for tool in early["tools/list"]["result"]["tools"]} >= {"classify_text"}

            doors.release.set()
            while not doors.app.is_open:
                await asyncio.sleep(0.01)
            for message in (INITIALIZE, rpc("tools/list", request_id=2), rpc("ping", request_id=4)):
                late = await client.post("/mcp", json=message, headers=AUTHORISED)
                assert without_trace_id(late.json()) == without_trace_id(early[message["method"]])  # the full app's route answers the same
        assert doors.builds == 1

    run(scenario)


def test_the_stateless_revisions_discovery_answers_early_with_its_routing_headers() -> None:
    async def scenario() -> None:
        doors = Doors()
        async with served(doors) as client:
            headers = {**AUTHORISED, "MCP-Protocol-Version": STATELESS, "Mcp-Method": "server/discover"}
            discover = rpc("server/discover", {"_meta": STATELESS_META})
            answer = await asyncio.wait_for(client.post("/mcp", json=discover, headers=headers), 5)
            assert answer.status_code == 200, answer.text
            assert STATELESS in answer.json()["result"]["supportedVersions"]
            assert not doors.app.is_open
            doors.release.set()

    run(scenario)


def test_the_edge_guard_refuses_early_handshakes_as_the_full_app_does() -> None:
    async def scenario() -> None:
        doors = Doors()
        async with served(doors) as client:
            keyless = await asyncio.wait_for(client.post("/mcp", json=INITIALIZE), 5)
            foreign = await client.post("/mcp", json=INITIALIZE, headers={**AUTHORISED, "Origin": "https://evil.example"})
            assert not doors.app.is_open
            assert keyless.status_code == 401 and "bearer" in keyless.json()["error"]
            assert foreign.status_code == 403 and "Origin" in foreign.json()["error"]
            doors.release.set()
            while not doors.app.is_open:
                await asyncio.sleep(0.01)
            assert (await client.post("/mcp", json=INITIALIZE)).status_code == 401

    run(scenario)


def test_requests_that_need_the_full_app_wait_for_it_and_are_served_by_it() -> None:
    async def scenario() -> None:
        doors = Doors()
        async with served(doors) as client:
            classify = asyncio.create_task(client.post("/mcp", json=CLASSIFY, headers=AUTHORISED))
            batch = asyncio.create_task(client.post("/mcp", json=[INITIALIZE, CLASSIFY], headers=AUTHORISED))
            rest = asyncio.create_task(client.post("/mcp/initialize", json=INITIALIZE["params"], headers=AUTHORISED))
            health = asyncio.create_task(client.get("/health"))
            await asyncio.sleep(0.3)
            assert not any(task.done() for task in (classify, batch, rest, health))  # each waits: no early answer
            doors.release.set()
            answered = await asyncio.wait_for(asyncio.gather(classify, batch, rest, health), 10)
            assert [response.status_code for response in answered] == [200, 200, 200, 200], [r.text for r in answered]
            assert answered[0].json()["result"]["structuredContent"]["category"]  # classified by the started backend
            assert len(answered[1].json()) == 2
            assert answered[2].json()["serverInfo"]["name"] == "mcp-classifier"

    run(scenario)


def test_a_request_the_full_app_is_not_up_for_within_the_deadline_gets_a_clear_503() -> None:
    async def scenario() -> None:
        doors = Doors(wait_s=0.2)
        async with served(doors) as client:
            answer = await asyncio.wait_for(client.get("/ready"), 5)
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert "still starting" in answer.json()["error"] and answer.json()["data"]["eventId"]
            doors.release.set()

    run(scenario)


def test_a_full_app_that_fails_to_build_stops_the_server_and_waiting_requests_hear_why() -> None:
    async def scenario() -> None:
        doors = Doors(fail_build=RuntimeError("port 50051 is taken"))
        async with served(doors) as client:
            waiting = asyncio.create_task(client.get("/health"))
            await asyncio.sleep(0.1)
            doors.release.set()
            answer = await asyncio.wait_for(waiting, 5)
            assert answer.status_code == 503 and "failed to start: port 50051 is taken" in answer.json()["error"]
        assert [str(failure) for failure in doors.failures] == ["port 50051 is taken"]

    run(scenario)


def test_shutdown_stops_the_full_apps_lifespan_and_a_build_still_held_is_cancelled() -> None:
    async def scenario() -> None:
        opened = Doors()
        async with served(opened):
            opened.release.set()
            while not opened.app.is_open:
                await asyncio.sleep(0.01)
        assert opened.backend.closed  # the full app's lifespan closed the backend it started

        held = Doors()
        async with served(held):
            await asyncio.sleep(0.05)
        assert held.builds == 1 and not held.app.is_open and held.failures == []

    run(scenario)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}', True),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}]', True),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', False),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}]', False),
        (b"[]", False),
        (b"not json", False),
        (b'"initialize"', False),
    ],
)
def test_only_bodies_made_of_handshake_messages_are_answered_early(body: bytes, expected: bool) -> None:
    assert handshake_only(body) is expected
