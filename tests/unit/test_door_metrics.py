"""Every door is observable: each request is counted and timed under its door, and a failure under its kind too.

In process over the fake backend: JSON-RPC and REST style on HTTP, legacy SSE's POST /messages, WebSocket,
stdio and the public gRPC API (a real server on a free loopback port). The WebSocket and gRPC gauges fall
back when their connection or call ends, and /metrics carries no ``_created`` series.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from mcp_classifier.api.v1 import gateway_pb2 as gpb
from mcp_classifier.api.v1 import gateway_pb2_grpc as gpb_grpc
from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.grpc_public import SERVICE_NAME, PublicGrpcServer
from mcp_classifier.transports.sse import SseSessions, local_sessions
from mcp_classifier.transports.stdio import serve_stdio
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

TEXT = "what is the integral of x squared"
CLASSIFY = {"name": "classify_text", "arguments": {"text": TEXT}}
RPC_CLASSIFY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": CLASSIFY}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
NOT_JSON = "{not json"
OPEN_SESSION = "a-stream-held-here"
CALL_TIMEOUT_S = 10
KEY = "door-metrics-key"
CORRUPT = b"\x0a\x05ab"  # a length prefix longer than the bytes that follow: protobuf cannot decode it


class Doors:
    """One app and its metrics; reads a series as it stands now."""

    def __init__(self, metrics: GatewayMetrics, client: TestClient, sessions: SseSessions) -> None:
        self.metrics = metrics
        self.client = client
        self.sessions = sessions

    def value(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


def requests(metrics: GatewayMetrics, door: str) -> float:
    return metrics.registry.get_sample_value("mcp_classifier_door_requests_total", {"door": door}) or 0.0


def timed(metrics: GatewayMetrics, door: str) -> float:
    return metrics.registry.get_sample_value("mcp_classifier_door_request_seconds_count", {"door": door}) or 0.0


def errors(metrics: GatewayMetrics, door: str, kind: str) -> float:
    return metrics.registry.get_sample_value("mcp_classifier_door_errors_total", {"door": door, "kind": kind}) or 0.0


@pytest.fixture(scope="module")
def doors() -> Iterator[Doors]:
    backend = FakeBackend()
    metrics = GatewayMetrics()
    sessions = local_sessions(Settings().serving, metrics, DEFAULT_MAX_BODY_BYTES)
    tool_filter = build_tool_filter(Settings(), backend)
    app = gateway_app(
        build_dispatcher(Settings(), backend, tool_filter),
        backend,
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
        metrics=metrics,
        sse_sessions=sessions,
        tool_filter=tool_filter,
    )
    with TestClient(app) as client:
        yield Doors(metrics, client, sessions)


def test_jsonrpc_requests_and_errors_are_counted_on_the_http_door(doors: Doors) -> None:
    before, before_timed = requests(doors.metrics, "http"), timed(doors.metrics, "http")
    assert doors.client.post("/mcp", json=RPC_CLASSIFY).status_code == 200
    doors.client.post("/mcp", content=NOT_JSON, headers={"content-type": "application/json"})
    assert requests(doors.metrics, "http") == before + 2
    assert timed(doors.metrics, "http") == before_timed + 2
    assert errors(doors.metrics, "http", "parse_error") == 1


def test_rest_style_requests_and_errors_are_counted_on_the_rest_door(doors: Doors) -> None:
    before = requests(doors.metrics, "rest")
    assert doors.client.post("/mcp/tools/call", json=CLASSIFY).status_code == 200
    failed = doors.client.post("/mcp/tools/call", json={"name": "classify_text", "arguments": {}})
    assert failed.json()["isError"] is True, "a tool's failure is an answer, and an error of its own kind"
    assert doors.client.post("/mcp/no-such-method", json={}).status_code == 404
    assert requests(doors.metrics, "rest") == before + 3
    assert timed(doors.metrics, "rest") >= 3
    assert errors(doors.metrics, "rest", "tool_execution_failed") == 1
    assert errors(doors.metrics, "rest", "method_not_found") == 1


def test_legacy_sse_messages_are_counted_on_the_sse_door(doors: Doors) -> None:
    before = requests(doors.metrics, "sse")
    doors.sessions.queues[OPEN_SESSION] = asyncio.Queue()  # a stream held by this replica
    try:
        assert doors.client.post(f"/messages?sessionId={OPEN_SESSION}", json=PING).status_code == 202
    finally:
        doors.sessions.queues.pop(OPEN_SESSION, None)
    assert doors.client.post("/messages?sessionId=gone", json=PING).status_code == 404
    assert requests(doors.metrics, "sse") == before + 2
    assert timed(doors.metrics, "sse") >= 2
    assert errors(doors.metrics, "sse", "unknown_session") == 1


def test_websocket_messages_are_counted_and_the_connection_gauge_follows_the_socket(doors: Doors) -> None:
    before = requests(doors.metrics, "ws")
    assert doors.value("mcp_classifier_websocket_connections") == 0
    with doors.client.websocket_connect("/ws") as socket:
        assert doors.value("mcp_classifier_websocket_connections") == 1
        socket.send_text(json.dumps(RPC_CLASSIFY))
        assert "result" in json.loads(socket.receive_text())
        socket.send_text(NOT_JSON)
        assert json.loads(socket.receive_text())["error"]["code"] == -32700
    assert requests(doors.metrics, "ws") == before + 2
    assert timed(doors.metrics, "ws") >= 2
    assert errors(doors.metrics, "ws", "parse_error") == 1
    assert doors.value("mcp_classifier_websocket_connections") == 0


def test_tool_filter_requests_are_counted_on_their_door(doors: Doors) -> None:
    before = requests(doors.metrics, "tool_filter")
    doors.client.post("/v1/tools/filter", json={"tools": "not a list"})
    assert requests(doors.metrics, "tool_filter") == before + 1
    assert errors(doors.metrics, "tool_filter", "invalid_params") == 1


def test_a_path_nothing_serves_is_counted_under_one_bounded_door(doors: Doors) -> None:
    before = requests(doors.metrics, "other")
    for path in ("/a-made-up-path", "/another/one"):
        assert doors.client.post(path, json={}).status_code == 404
    assert requests(doors.metrics, "other") == before + 2
    assert errors(doors.metrics, "other", "not_found") >= 2
    doors_seen = {
        s.labels["door"] for f in text_string_to_metric_families(doors.metrics.render().decode()) for s in f.samples if "door" in s.labels
    }
    assert not any("made-up" in door or "another" in door for door in doors_seen)


def test_no_created_series_are_exported(doors: Doors) -> None:
    doors.client.post("/mcp", json=PING)
    exported = doors.client.get("/metrics").text
    assert "mcp_classifier_door_requests_total" in exported
    assert "_created" not in exported


def test_stdio_lines_are_counted_on_the_stdio_door() -> None:
    backend = FakeBackend()
    metrics = GatewayMetrics()
    lines = (json.dumps(PING) + "\n" + NOT_JSON + "\n").encode()
    out = io.BytesIO()
    asyncio.run(serve_stdio(build_dispatcher(Settings(), backend), io.BytesIO(lines), out, observer=metrics.observe_door))
    assert len(out.getvalue().splitlines()) == 2
    assert requests(metrics, "stdio") == 2 and timed(metrics, "stdio") == 2
    assert errors(metrics, "stdio", "parse_error") == 1


def grpc_calls(keys: ApiKeys, metrics: GatewayMetrics) -> None:
    """A good call, a tool's refusal, undecodable bytes and (with keys) a call without a key, on a real server."""

    async def run() -> None:
        backend = FakeBackend()
        dispatcher = build_dispatcher(Settings(), backend)
        server = PublicGrpcServer(dispatcher, keys, host="127.0.0.1", port=0, reflection=False, tracing=False, metrics=metrics)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = gpb_grpc.ClassifierGatewayStub(channel)
                auth = (("authorization", f"Bearer {KEY}"),) if keys.enabled else ()
                await stub.Classify(gpb.ClassifyTextRequest(text=TEXT), metadata=auth, timeout=CALL_TIMEOUT_S)
                failing: list[Any] = [
                    stub.Classify(gpb.ClassifyTextRequest(text=""), metadata=auth, timeout=CALL_TIMEOUT_S),
                    channel.unary_unary(f"/{SERVICE_NAME}/Classify")(CORRUPT, metadata=auth, timeout=CALL_TIMEOUT_S),
                ]
                if keys.enabled:
                    failing.append(stub.Classify(gpb.ClassifyTextRequest(text=TEXT), timeout=CALL_TIMEOUT_S))
                for call in failing:
                    with pytest.raises(grpc.aio.AioRpcError):
                        await call
        finally:
            await server.close(grace_s=0)

    asyncio.run(run())


def test_grpc_calls_and_their_failures_are_counted_on_the_grpc_door() -> None:
    metrics = GatewayMetrics()
    grpc_calls(ApiKeys(KEY, None), metrics)
    assert requests(metrics, "grpc") == 4 and timed(metrics, "grpc") == 4
    assert errors(metrics, "grpc", "tool_execution_failed") == 1
    assert errors(metrics, "grpc", "parse_error") == 1
    assert errors(metrics, "grpc", "unauthorized") == 1
    assert metrics.registry.get_sample_value("mcp_classifier_grpc_calls_in_flight") == 0
