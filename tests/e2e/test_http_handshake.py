"""`mcp-classifier serve` answers `initialize` over HTTP at once, while its model still loads.

The real process and the real model. The handshake door opens with the port (transports.opening), before
FastAPI is imported and long before the model is loaded: `initialize` and `tools/list` are answered within 5 s
of the spawn and before the backend reports it is ready, `/ready` says 503 meanwhile, and a classification
sent straight after waits for the model and is answered once it is loaded.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

from mcp_classifier.loadtest.stack import GatewayProcess

HANDSHAKE_BUDGET_S = 5.0  # from the spawn: well inside an MCP client's 30 s, on a busy host too
READY_LOG = "the classification backend is ready"
STARTING = re.compile(r"starting on (http://\S+)")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "router", "version": "1"}},
}


def test_initialize_is_answered_over_http_within_seconds_while_the_model_loads(tmp_path: Path) -> None:
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        spawned = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_classifier.cli", "serve", "--host", "127.0.0.1", "--port", "0", "--backend", "local"]
            + ["--request-timeout-s", "600", "--no-cache"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    try:
        url = None
        answer = None
        with httpx.Client(timeout=60) as http:
            while answer is None and time.monotonic() - spawned < 120:
                assert process.poll() is None, log_path.read_text(errors="replace")[-4000:]
                if url is None:
                    match = STARTING.search(log_path.read_text(errors="replace"))
                    url = match.group(1) if match else None
                if url is not None:
                    try:
                        answer = http.post(f"{url}/mcp", json=INITIALIZE)
                    except httpx.TransportError:
                        pass
                time.sleep(0.01)
            answered_after = time.monotonic() - spawned
            assert answer is not None and answer.status_code == 200, answer
            assert answer.json()["result"]["serverInfo"]["name"] == "mcp-classifier"
            assert answered_after <= HANDSHAKE_BUDGET_S, f"initialize answered {answered_after:.1f} s after the spawn"
            assert READY_LOG not in log_path.read_text(errors="replace"), "the model was loaded before the handshake"

            assert http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
            listed = http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).json()
            assert "classify_text" in {tool["name"] for tool in listed["result"]["tools"]}
            assert http.get(f"{url}/ready").status_code == 503  # the full app answers now; the model still loads

            text = {"text": "integrate x squared from 0 to 1"}
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "classify_text", "arguments": text}}
            classified = http.post(f"{url}/mcp", json=call, timeout=600).json()
            assert classified["result"]["isError"] is False, classified
            assert classified["result"]["structuredContent"]["category"] == "math"
            assert http.get(f"{url}/ready").status_code == 200
    finally:
        GatewayProcess(process, url or "", log_path).stop()
