"""One error table for every door, event ids, and correlation (trace id in every answer and one log line per request).

In process over the fake backend: the rules are the protocol core's, the same for every transport.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_classifier.backend.base import BackendTimeout, BackendUnavailable
from mcp_classifier.protocol.errors import ERROR_TABLE, ErrorKind
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import TRACE_META_KEY, asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
CALL = {"name": "classify_text", "arguments": {"text": "what is the integral of x squared"}}
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def failing() -> Iterator[tuple[httpx.Client, FakeBackend]]:
    backend = FakeBackend()
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with asgi_client(app) as http:
        yield http, backend


def jsonrpc(client: httpx.Client, method: str, params: dict[str, Any], *, stateless: bool = False, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META} if stateless else params}
    sent = dict(headers)
    if stateless:
        sent |= {"MCP-Protocol-Version": STATELESS, "Mcp-Method": method}
        if method == "tools/call":
            sent["Mcp-Name"] = params["name"]
    return client.post("/mcp", json=body, headers=sent)


def test_every_kind_has_one_rule() -> None:
    assert set(ERROR_TABLE) == set(ErrorKind)
    assert ERROR_TABLE[ErrorKind.BACKEND_TIMEOUT].rest_status == 504 and ERROR_TABLE[ErrorKind.BACKEND_UNAVAILABLE].rest_status == 503


@pytest.mark.parametrize(
    ("failure", "kind", "rest_status", "grpc_status"),
    [
        (BackendUnavailable("replicas gone"), "backend_unavailable", 503, "UNAVAILABLE"),
        (BackendTimeout("too slow"), "backend_timeout", 504, "DEADLINE_EXCEEDED"),
    ],
)
def test_one_backend_failure_is_said_by_each_door_from_the_table(
    failing: tuple[httpx.Client, FakeBackend],
    failure: Exception,
    kind: str,
    rest_status: int,
    grpc_status: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, backend = failing
    backend.fail_with = failure  # type: ignore[assignment]
    caplog.set_level(logging.INFO)
    handshake = jsonrpc(client, "tools/call", CALL)
    stateless = jsonrpc(client, "tools/call", CALL, stateless=True)
    rest = client.post("/mcp/tools/call", json=CALL)
    assert (handshake.status_code, stateless.status_code, rest.status_code) == (200, 200, rest_status)
    assert ERROR_TABLE[ErrorKind(kind)].grpc_status == grpc_status
    errors = [handshake.json()["error"], stateless.json()["error"], rest.json()]
    event_ids = [e["data"]["eventId"] for e in errors]
    assert len(set(event_ids)) == 3, "one event id per failure"
    assert all(e.get("code", -32000) == -32000 for e in errors[:2])
    logged = {getattr(r, "event_id", None): r for r in caplog.records if getattr(r, "error_kind", None) == kind}
    assert set(event_ids) <= set(logged), "every event id the caller got is in a log line"
    for response, error in zip((handshake, stateless, rest), errors, strict=True):
        assert error["data"]["traceId"] == response.headers["x-trace-id"]


def test_failed_tool_call_carries_an_event_id_that_is_logged(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    result = jsonrpc(client, "tools/call", {"name": "classify_text", "arguments": {"text": ""}}).json()["result"]
    assert result["isError"] is True
    event_id = result["_meta"]["dev.mcp-classifier/eventId"]
    assert any(getattr(r, "event_id", None) == event_id for r in caplog.records)
    access = [r for r in caplog.records if r.name == "mcp_classifier.access" and getattr(r, "event_id", None) == event_id]
    assert len(access) == 1 and access[0].outcome == "tool_execution_failed" and access[0].tool == "classify_text"


@pytest.mark.parametrize("stateless", [False, True], ids=["handshake", "2026-07-28"])
def test_every_answer_carries_its_trace_id_in_meta_and_header(client: httpx.Client, stateless: bool) -> None:
    response = jsonrpc(client, "tools/call", CALL, stateless=stateless)
    trace_id = response.headers["x-trace-id"]
    assert len(trace_id) == 32 and int(trace_id, 16)
    assert response.json()["result"]["_meta"][TRACE_META_KEY] == trace_id
    assert jsonrpc(client, "tools/call", CALL, stateless=stateless).headers["x-trace-id"] != trace_id, "a fresh trace per request"


def test_traceparent_header_continues_the_callers_trace(client: httpx.Client) -> None:
    response = jsonrpc(client, "tools/list", {}, traceparent=CALLER_TRACEPARENT)
    assert response.headers["x-trace-id"] == CALLER_TRACE
    assert response.json()["result"]["_meta"][TRACE_META_KEY] == CALLER_TRACE


def test_traceparent_in_meta_continues_the_callers_trace(client: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**CALL, "_meta": {**META, "traceparent": CALLER_TRACEPARENT}}}
    headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": "classify_text"}
    response = client.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200
    assert response.headers["x-trace-id"] == CALLER_TRACE
    assert response.json()["result"]["_meta"][TRACE_META_KEY] == CALLER_TRACE


def test_a_malformed_traceparent_is_ignored_not_refused(client: httpx.Client) -> None:
    response = jsonrpc(client, "tools/list", {}, traceparent="00-not-a-trace-01")
    assert response.status_code == 200 and len(response.headers["x-trace-id"]) == 32


def test_one_access_line_per_request_with_the_callers_fields(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcp_classifier.access")
    response = jsonrpc(client, "tools/call", CALL, stateless=True)
    lines = [r for r in caplog.records if r.name == "mcp_classifier.access"]
    assert len(lines) == 1
    line = lines[0]
    assert (line.trace_id, line.door, line.era, line.method, line.tool, line.outcome) == (
        response.headers["x-trace-id"],
        "http",
        STATELESS,
        "tools/call",
        "classify_text",
        "ok",
    )
    assert line.latency_ms > 0
    rest = client.post("/mcp/nope", json={})
    assert rest.status_code == 404 and rest.headers["x-trace-id"]
    assert [r.outcome for r in caplog.records if r.name == "mcp_classifier.access"][-1] == "method_not_found"


def test_json_log_format_writes_the_record_fields_as_keys(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from mcp_classifier.protocol import correlation
    from mcp_classifier.telemetry import configure_logging

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging("info", "json")
        record = correlation.begin("ws", session_id="s-1")
        correlation.note(era="handshake", method="tools/list")
        correlation.finish(record)
        line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
        assert line["trace_id"] == record.trace_id and line["session_id"] == "s-1" and line["door"] == "ws"
        assert line["method"] == "tools/list" and line["level"] == "INFO" and "time" in line
        configure_logging("info", "text")
        correlation.finish(correlation.begin("ws"))
        assert not capsys.readouterr().err.strip().startswith("{")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_the_documented_error_table_is_the_code_table() -> None:
    from tests.support import REPO_ROOT

    page = (REPO_ROOT / "docs" / "protocol.md").read_text()
    section = page.split("### Errors: one table for every door", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:]
    assert set(rows) == {kind.value for kind in ErrorKind}
    for kind, rule in ERROR_TABLE.items():
        code, rest, stateless, grpc_status = rows[kind.value]
        assert code == (str(rule.code) if rule.code is not None else code) and (rule.code is not None or "isError" in code)
        assert (int(rest), int(stateless), grpc_status.strip("`")) == (rule.rest_status, rule.stateless_status, rule.grpc_status)
