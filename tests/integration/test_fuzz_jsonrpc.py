"""hypothesis-generated JSON-RPC at POST /mcp and over /ws (in process, fake backend), and over stdio (a real process).

Messages are built from the protocol's own parts, right and wrong: versions, ids of every JSON type,
known and unknown methods, params of any shape, batches, and raw bytes. Whatever arrives, the answer
is valid JSON-RPC (or HTTP 202 / nothing when only notifications were sent), never a crash and never
a 5xx. Under MCP-Protocol-Version 2026-07-28 (or any non-handshake version), requests that start right
and are bent in places (meta, ids, routing headers) get one answer with the era's documented status.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher, build_tool_filter
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.fuzz import fuzz_cases
from tests.support.http_app import gateway_app

HTTP_CASES = fuzz_cases(2000)
STDIO_CASES = fuzz_cases(800)  # one real process: each case waits for its ping

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "prompts/list", "notifications/initialized"]
TOOLS = ["classify_text", "classify_batch", "select_tools", "list_categories"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
ids = (
    st.none()
    | st.integers()
    | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.lists(st.integers(), max_size=2)
)
arguments = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=60) | json_values,
        "texts": st.lists(st.text(max_size=30), max_size=5) | json_values,
        "with_probabilities": st.booleans() | json_values,
        "query": st.text(max_size=40) | json_values,
        "tools": st.lists(
            st.fixed_dictionaries({"name": st.text(min_size=1, max_size=12)}, optional={"description": st.text(max_size=30)}), max_size=4
        )
        | json_values,
        "top_k": st.integers(-2, 20) | json_values,
    },
)
tool_call_params = st.fixed_dictionaries(
    {}, optional={"name": st.sampled_from(TOOLS) | st.text(max_size=15) | json_values, "arguments": arguments | json_values}
)
message = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | st.sampled_from(["1.0", "2", ""]) | json_values,
        "id": ids,
        "method": st.sampled_from(METHODS) | st.text(max_size=20) | json_values,
        "params": tool_call_params | json_values,
        "result": json_values,
        "error": json_values,
    },
)
payload = message | st.lists(message, min_size=0, max_size=5) | json_values
bodies = payload.map(lambda p: json.dumps(p).encode()) | st.binary(max_size=80)  # json: big ints and lone surrogates too


def assert_jsonrpc_answer(answer: Any) -> None:
    """One response object, or a non-empty batch of them: version, an id, exactly one of result and error."""
    items = answer if isinstance(answer, list) else [answer]
    assert items, "an empty batch answer"
    for item in items:
        assert isinstance(item, dict) and item.get("jsonrpc") == "2.0" and "id" in item, item
        assert ("result" in item) != ("error" in item), item
        if "error" in item:
            assert isinstance(item["error"]["code"], int) and isinstance(item["error"]["message"], str), item


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    backend = FakeBackend()
    config = Settings()
    tool_filter = build_tool_filter(config, backend)
    app = gateway_app(
        build_dispatcher(config, backend, tool_filter), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, tool_filter=tool_filter
    )
    with asgi_client(app) as http:
        yield http


@settings(max_examples=HTTP_CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(body=bodies)
def test_any_body_at_mcp_gets_valid_jsonrpc_or_202(client: httpx.Client, body: bytes) -> None:
    response = client.post(
        "/mcp", content=body, headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    )
    assert response.status_code in (200, 202), (response.status_code, response.text)
    if response.status_code == 200:
        assert_jsonrpc_answer(response.json())
    else:
        assert response.content == b""


STATELESS_CASES = fuzz_cases(1000)
STATELESS_METHODS = [*METHODS, "server/discover", "resources/templates/list", "logging/setLevel", "resources/subscribe"]
VERSIONS = st.sampled_from(["2026-07-28", "v999.0.0", "2025-06-18", ""]) | st.text(max_size=12)
stateless_meta = st.fixed_dictionaries(
    {},
    optional={
        "io.modelcontextprotocol/protocolVersion": VERSIONS | json_values,
        "io.modelcontextprotocol/clientCapabilities": st.just({}) | json_values,
        "io.modelcontextprotocol/clientInfo": json_values,
    },
)
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)  # what an HTTP header can carry
header_values = st.lists(
    st.sampled_from(["2026-07-28", "v999.0.0", "tools/call", "tools/list", "server/discover", "classify_text", " "]) | header_text,
    max_size=2,
)
# A header naming a handshake version (or an empty one) is the handshake era, fuzzed above.
HANDSHAKE_HEADERS = ("", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
stateless_versions = (st.sampled_from(["2026-07-28", "v999.0.0"]) | header_text).filter(lambda v: v.strip() not in HANDSHAKE_HEADERS)
VALID_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@st.composite
def stateless_requests(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, str]]]:
    """A request that is right by construction, then bent in one or more places (meta, id, headers), so that
    every check is reached and the valid path is taken often; or raw bytes under random headers."""
    if draw(st.integers(0, 9)) == 0:
        return draw(bodies), [("MCP-Protocol-Version", draw(stateless_versions))]
    method = draw(st.sampled_from(STATELESS_METHODS) | st.text(max_size=20))
    params = draw(tool_call_params) if method == "tools/call" else {}
    meta = draw(stateless_meta) if draw(st.integers(0, 3)) == 0 else dict(VALID_META)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": meta}}
    if draw(st.integers(0, 9)):  # one in ten is a notification
        message["id"] = draw(st.integers() | st.text(max_size=8) if draw(st.integers(0, 9)) else ids)
    version = meta.get("io.modelcontextprotocol/protocolVersion")
    sendable = isinstance(version, str) and version.isascii() and version.isprintable() and version.strip() not in HANDSHAKE_HEADERS
    version_header = version if sendable else "2026-07-28"
    headers = [("MCP-Protocol-Version", draw(stateless_versions) if draw(st.integers(0, 5)) == 0 else version_header)]
    method_headers = (
        draw(header_values) if draw(st.integers(0, 5)) == 0 else ([method] if method.isascii() and method.isprintable() else [])
    )
    name = params.get("name") if isinstance(params, dict) else None
    default_names = [name] if isinstance(name, str) and name.isascii() and name.isprintable() else []
    name_headers = draw(header_values) if draw(st.integers(0, 5)) == 0 else default_names
    headers += [("Mcp-Method", value) for value in method_headers] + [("Mcp-Name", value) for value in name_headers]
    return json.dumps(message).encode(), headers


@settings(max_examples=STATELESS_CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(case=stateless_requests())
def test_any_request_in_the_2026_era_gets_one_answer_with_its_documented_status(
    client: httpx.Client, case: tuple[bytes, list[tuple[str, str]]]
) -> None:
    """With MCP-Protocol-Version naming a non-handshake version: one JSON-RPC answer with 200, 400 or 404, or a bare 202."""
    body, headers = case
    response = client.post("/mcp", content=body, headers=[("Content-Type", "application/json"), *headers])
    if response.status_code == 202:
        assert response.content == b""
        return
    assert response.status_code in (200, 400, 404), (response.status_code, response.text)
    answer = response.json()
    assert isinstance(answer, dict), answer  # never a batch in this era
    assert_jsonrpc_answer(answer)
    if response.status_code != 200:
        assert "error" in answer and answer["error"]["code"] in (-32700, -32600, -32602, -32020, -32022, -32601), answer
    if "result" in answer:
        assert answer["result"]["resultType"] == "complete", answer


class StdioServer:
    """`mcp-classifier stdio` with a reader thread: every line it prints lands in a queue."""

    def __init__(self) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mcp_classifier.cli", "stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.probes = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def probe(self) -> list[Any]:
        """Ping with a fresh id and wait for its answer; returns every other answer seen meanwhile."""
        self.probes += 1
        probe_id = f"probe-{self.probes}"
        self.send(orjson.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "ping"}))
        others = []
        while True:
            answer = orjson.loads(self.lines.get(timeout=60))
            if isinstance(answer, dict) and answer.get("id") == probe_id:
                assert answer.get("result") == {}, answer
                return others
            others.append(answer)

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # end of input: the server answers what is pending and exits
        assert self.process.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def stdio() -> Iterator[StdioServer]:
    server = StdioServer()
    server.probe()  # up and answering; calls that need the model wait for its start (backend/starting.py)
    yield server
    server.stop()


@settings(max_examples=STDIO_CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(body=bodies)
def test_any_line_over_stdio_gets_valid_jsonrpc_and_the_server_lives_on(stdio: StdioServer, body: bytes) -> None:
    for line in body.split(b"\n"):  # stdio frames by newline: raw bytes with newlines are several messages
        if line.strip():
            stdio.send(line)
    for answer in stdio.probe():
        assert_jsonrpc_answer(answer)
    assert stdio.process.poll() is None


# ---- WebSocket: the same messages, with and without "jsonrpc", one connection for every case ----------
WEBSOCKET_CASES = fuzz_cases(600)
bare_message = message.map(lambda m: {k: v for k, v in m.items() if k != "jsonrpc"} if isinstance(m, dict) else m)
frames = (payload | bare_message | st.lists(bare_message, max_size=4)).map(lambda p: json.dumps(p)) | st.text(max_size=60)


@pytest.fixture(scope="module")
def websocket() -> Iterator[Any]:
    from fastapi.testclient import TestClient

    backend = FakeBackend()
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with TestClient(app) as http, http.websocket_connect("/ws", subprotocols=["mcp"]) as socket:
        socket.probes = 0  # type: ignore[attr-defined]
        yield socket


@settings(max_examples=WEBSOCKET_CASES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(frame=frames)
def test_any_frame_over_websocket_gets_valid_answers_and_the_connection_lives_on(websocket: Any, frame: str) -> None:
    """Every answer is JSON-RPC (with "jsonrpc" or, for a bare message, without); a probe after each frame is answered."""
    websocket.send_text(frame)
    websocket.probes += 1
    probe_id = f"probe-{websocket.probes}"
    websocket.send_text(json.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "ping"}))
    while True:
        answer = json.loads(websocket.receive_text())
        if isinstance(answer, dict) and answer.get("id") == probe_id:
            assert answer.get("result") == {}, answer
            return
        items = answer if isinstance(answer, list) else [answer]
        assert items, "an empty batch answer"
        for item in items:
            assert isinstance(item, dict) and "id" in item and item.get("jsonrpc", "2.0") == "2.0", item
            assert ("result" in item) != ("error" in item), item
