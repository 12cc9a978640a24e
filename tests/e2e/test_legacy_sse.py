"""Legacy HTTP+SSE (2024-11-05) against real gateways: across two replicas through Redis, and alone without it.

The cross-replica test is the deployment that breaks naive SSE servers: a load balancer that
spreads connections, so the client's stream is held by one gateway while its POSTs reach the other.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import mcp
import pytest
from mcp.client.sse import sse_client

from tests.support import assert_valid_classification
from tests.support.processes import start_server
from tests.support.redis_server import RedisServer
from tests.support.round_robin_proxy import RoundRobinProxy


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _access_lines(log: str, door: str) -> list[dict]:
    lines = [json.loads(raw) for raw in log.splitlines() if raw.startswith("{")]
    return [line for line in lines if line.get("logger") == "mcp_classifier.access" and line.get("door") == door]


def test_sdk_sse_client_with_its_stream_on_one_gateway_and_its_posts_on_the_other(tmp_path: Path, category_count: int) -> None:
    redis = RedisServer(tmp_path).start()
    gateways = [start_server(tmp_path, "--redis-url", redis.url) for _ in range(2)]
    proxy = RoundRobinProxy([_address(g.url) for g in gateways]).start()
    try:

        async def run() -> tuple[list[str], dict, dict]:
            async with sse_client(f"{proxy.url}/sse", timeout=30, sse_read_timeout=120) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    classified = await session.call_tool("classify_text", {"text": "What is the boiling point of water in kelvin?"})
                    categories = await session.call_tool("list_categories", {})
            assert not classified.is_error and not categories.is_error
            return [t.name for t in tools.tools], json.loads(classified.content[0].text), json.loads(categories.content[0].text)

        names, classify_json, categories_json = asyncio.run(run())
        assert {"classify_text", "list_categories", "select_tools", "classify_batch"} <= set(names)
        assert_valid_classification(classify_json, category_count)
        assert classify_json["category"] == "science" and len(categories_json["categories"]) == category_count

        assert len(set(proxy.connections[:2])) == 2, "the stream and the POSTs went to different gateways"
        stream_owner, poster = (g for b in proxy.connections[:2] for g in gateways if _address(g.url) == b)
        posted = _access_lines(poster.log(), "sse")
        assert {line["method"] for line in posted} >= {"initialize", "tools/list", "tools/call"}
        assert all(line["outcome"] == "ok" and line["session_id"] for line in posted)
        assert not _access_lines(stream_owner.log(), "sse"), "every POST was answered by the other gateway, through Redis"
        for gateway in gateways:
            assert httpx.get(f"{gateway.url}/health", timeout=10).json()["legacy_sse"]["across_replicas"] is True

        unknown = httpx.post(
            f"{proxy.url}/messages?sessionId=no-such-session", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10
        )
        assert unknown.status_code == 404 and "unknown or expired session" in unknown.json()["error"]
        missing = httpx.post(f"{proxy.url}/messages", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
        assert missing.status_code == 400 and "sessionId" in missing.json()["error"]
    finally:
        proxy.stop()
        for gateway in gateways:
            gateway.stop()
        redis.stop()


@pytest.fixture(scope="module")
def lone_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """No cache and no rate limit: no Redis at all. Short keep-alive and idle expiry, one stream at most."""
    server = start_server(
        tmp_path_factory.mktemp("sse"), "--no-cache", "--sse-max-streams", "1", "--sse-keepalive-s", "0.3", "--sse-session-idle-s", "2"
    )
    yield server.url
    server.stop()


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) pairs, and ("comment", text) for keep-alive comments."""
    event, data = "message", ""
    for line in lines:
        if line.startswith(":"):
            yield "comment", line[1:].strip()
        elif line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            data = line.split(":", 1)[1].strip()
        elif line == "" and data:
            yield event, data
            event, data = "message", ""


def test_without_redis_one_gateway_serves_sse_caps_streams_keeps_alive_and_expires_idle_sessions(lone_gateway: str) -> None:
    health = httpx.get(f"{lone_gateway}/health", timeout=10).json()["legacy_sse"]
    assert health["across_replicas"] is False and "no Redis" in health["note"]
    with httpx.Client(base_url=lone_gateway, timeout=30) as http, http.stream("GET", "/sse") as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        events = _events(stream.iter_lines())
        kind, endpoint = next(events)
        assert kind == "endpoint" and endpoint.startswith("/messages?sessionId=")

        with httpx.Client(base_url=lone_gateway, timeout=30) as other:
            assert "mcp_classifier_sse_streams 1.0" in other.get("/metrics").text
            refused = other.get("/sse")
            assert refused.status_code == 503 and refused.headers["retry-after"] and "sse_max_streams" in refused.json()["error"]
            accepted = other.post(
                endpoint,
                json={"jsonrpc": "2.0", "id": "p1", "method": "tools/call", "params": {"name": "list_categories", "arguments": {}}},
            )
            assert accepted.status_code == 202

            seen_comment = False
            for kind, data in events:
                if kind == "comment":
                    seen_comment = True
                elif kind == "message":
                    answer = json.loads(data)
                    assert answer["id"] == "p1" and answer["result"]["isError"] is False
                    break
            started = time.monotonic()
            for kind, _ in events:  # quiet now: keep-alive comments until the idle session expires and the stream ends
                seen_comment = seen_comment or kind == "comment"
            assert seen_comment, "keep-alive comments on a quiet stream"
            assert 1.0 <= time.monotonic() - started <= 10, "the idle session expired after about sse_session_idle_s"
            gone = other.post(endpoint, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert gone.status_code == 404 and "expired" in gone.json()["error"]


def test_sigterm_ends_open_streams_cleanly_and_refuses_new_ones_while_draining(tmp_path: Path) -> None:
    """Clients of a gateway being replaced get their stream ended at once (to reconnect to a ready replica), not cut at exit."""
    import signal

    server = start_server(tmp_path, "--no-cache", "--drain-delay-s", "10")  # exit comes 10 s after the signal
    with httpx.Client(base_url=server.url, timeout=30) as http, http.stream("GET", "/sse") as stream:
        events = _events(stream.iter_lines())
        assert next(events)[0] == "endpoint"
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert [kind for kind, _ in events if kind != "comment"] == [], "the stream ends without another event"
        assert time.monotonic() - signalled < 5, "ended at the signal, not at exit"  # room for a loaded host
        refused = httpx.get(f"{server.url}/sse", timeout=5)
        assert refused.status_code == 503 and "shutting down" in refused.json()["error"]
    assert server.process.wait(timeout=30) == 0
    assert "without completing response" not in server.log()
