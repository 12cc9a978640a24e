"""Correlation end to end: a real gateway with tracing exported to a real OTLP receiver.

The trace id a caller gets back (X-Trace-Id and result._meta) must lead to the gateway's JSON log
line for that request and to its exported spans, including when the caller's traceparent (header
or _meta) starts the trace.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import httpx

from mcp_classifier.api.v1 import gateway_pb2 as gpb
from mcp_classifier.api.v1 import gateway_pb2_grpc as gpb_grpc
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.processes import start_server

TRACE_META_KEY = "dev.mcp-classifier/traceId"
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"


def _grpc_target(read_log: Callable[[], str]) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = re.search(r"gRPC API listening on (\S+:\d+)", read_log())
        if match:
            return match.group(1)
        time.sleep(0.1)
    raise AssertionError("the gRPC API did not start")


def _log_lines(log: str) -> list[dict]:
    lines = []
    for raw in log.splitlines():
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


def test_trace_id_from_the_answer_is_in_the_json_log_line_and_the_exported_spans(tmp_path: Path) -> None:
    otlp = OtlpReceiver()
    otlp.start()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint, "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_BSP_SCHEDULE_DELAY": "100"}
    server = start_server(tmp_path, "--grpc-port", "0", env=env)
    try:
        grpc_target = _grpc_target(server.log)
        with grpc.insecure_channel(grpc_target) as channel:
            over_grpc = gpb_grpc.ClassifierGatewayStub(channel).Classify(gpb.ClassifyTextRequest(text="integrate x squared"), timeout=60)
        with httpx.Client(base_url=server.url, timeout=60) as http:
            plain = http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "classify_text", "arguments": {"text": "integrate x squared"}},
                },
            )
            stateless = http.post(
                "/mcp",
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {
                        "name": "classify_text",
                        "arguments": {"text": "who won the battle of hastings"},
                        "_meta": {**META, "traceparent": f"00-{CALLER_TRACE}-b7ad6b7169203331-01"},
                    },
                },
                headers={"MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": "classify_text"},
            )
        assert plain.status_code == 200 and stateless.status_code == 200
        trace_id = plain.headers["x-trace-id"]
        assert plain.json()["result"]["_meta"][TRACE_META_KEY] == trace_id
        assert stateless.headers["x-trace-id"] == CALLER_TRACE == stateless.json()["result"]["_meta"][TRACE_META_KEY]

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            traces = {span.trace_id for span in otlp.spans()}
            if {trace_id, CALLER_TRACE, over_grpc.trace_id} <= traces:
                break
            time.sleep(0.2)
        spans = otlp.spans()
        assert any(s.trace_id == trace_id and s.name == "mcp tools/call" for s in spans), "the answer's trace id names its spans"
        assert any(s.trace_id == CALLER_TRACE and s.name == "mcp tools/call" for s in spans), (
            "_meta traceparent continued the caller's trace"
        )

        access = [line for line in _log_lines(server.log()) if line.get("logger") == "mcp_classifier.access"]
        mine = [line for line in access if line["trace_id"] == trace_id]
        assert len(mine) == 1
        assert (mine[0]["door"], mine[0]["era"], mine[0]["method"], mine[0]["tool"], mine[0]["outcome"]) == (
            "http",
            "handshake",
            "tools/call",
            "classify_text",
            "ok",
        )
        assert mine[0]["latency_ms"] > 0
        assert [line["era"] for line in access if line["trace_id"] == CALLER_TRACE] == [STATELESS]
        assert [(line["door"], line["method"]) for line in access if line["trace_id"] == over_grpc.trace_id] == [("grpc", "classify_text")]
    finally:
        server.stop()
        otlp.stop()
