"""`mcp-classifier stdio` answers `initialize` at once, while its model still loads.

An MCP host that spawns the server gives up if the handshake waits for the model (the vLLM Semantic
Router's stdio client after 30 s). The real process, the real model: initialize and tools/list are
answered within 5 s of the request, before the backend reports it is ready, and a classification sent
straight after is answered once the model is loaded.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson

HANDSHAKE_BUDGET_S = 5.0  # the bound: well inside a 30 s client timeout, on a busy host too
READY_LOG = "the classification backend is ready"


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(orjson.dumps(message) + b"\n")
    process.stdin.flush()


def test_initialize_is_answered_within_seconds_while_the_model_loads(tmp_path: Path) -> None:
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_classifier.cli", "stdio", "--request-timeout-s", "600"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    answers: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            answers.put((time.monotonic(), orjson.loads(line)))

    threading.Thread(target=read, daemon=True).start()
    try:
        sent = time.monotonic()
        _send(
            process,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "router", "version": "1"}},
            },
        )
        answered_at, answer = answers.get(timeout=120)
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "mcp-classifier"
        assert answered_at - sent <= HANDSHAKE_BUDGET_S, f"initialize took {answered_at - sent:.1f} s"
        assert READY_LOG not in stderr_path.read_text(errors="replace"), "the model was loaded before the handshake"

        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        _, listed = answers.get(timeout=60)
        assert listed["id"] == 2 and "classify_text" in {tool["name"] for tool in listed["result"]["tools"]}

        text = {"text": "integrate x squared from 0 to 1"}
        _send(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "classify_text", "arguments": text}})
        _, classified = answers.get(timeout=600)
        assert classified["id"] == 3 and classified["result"]["isError"] is False, classified
        assert classified["result"]["structuredContent"]["category"] == "math"
        assert READY_LOG in stderr_path.read_text(errors="replace")
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
