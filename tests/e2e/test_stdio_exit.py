"""`mcp-classifier stdio` exits promptly at end of input, and answers everything it was asked first.

The README's one-liner (`printf ... | mcp-classifier stdio`) is answered before the model loads, and a normal
Python exit would join the model thread and wait out the load for nobody. At end of input, every pending answer
is written (a classification waits for the model), then the process exits, abandoning a load nobody waits for.
The real CLI process and the builtin model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

EXIT_BUDGET_S = 1.0  # the bound, from end of input to the process gone
ANSWER_WAIT_S = 600.0  # a generous wait for answers: the model loads on a possibly busy host
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}},
}


class StdioProcess:
    """The stdio server as an MCP host runs it: lines in on stdin, answers collected from stdout as they arrive."""

    def __init__(self, stderr_path: Path) -> None:
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mcp_classifier.cli", "stdio", "--request-timeout-s", str(int(ANSWER_WAIT_S))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
        self.stderr_path = stderr_path
        self.answers: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.answers.append(orjson.loads(line))

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(message) + b"\n")
        self.process.stdin.flush()

    def answered(self, request_id: int) -> bool:
        return any(a.get("id") == request_id for a in self.answers)

    def wait_answered(self, request_id: int) -> None:
        deadline = time.monotonic() + ANSWER_WAIT_S
        while not self.answered(request_id) and self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.answered(request_id), f"no answer to {request_id}; stderr:\n{self.stderr()[-3000:]}"

    def end_input(self) -> float:
        """Close stdin; the seconds until the process is gone."""
        assert self.process.stdin is not None
        ended = time.monotonic()
        self.process.stdin.close()
        self.process.wait(timeout=ANSWER_WAIT_S)
        gone = time.monotonic() - ended
        self._reader.join(timeout=10)  # stdout is closed with the process: every answer is read by now
        return gone

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture()
def stdio(tmp_path: Path) -> Iterator[StdioProcess]:
    server = StdioProcess(tmp_path / "stderr.log")
    yield server
    server.kill()


def test_stdio_exits_within_a_second_of_end_of_input(stdio: StdioProcess) -> None:
    stdio.send(INITIALIZE)
    stdio.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    stdio.wait_answered(2)
    gone = stdio.end_input()
    assert stdio.process.returncode == 0, stdio.stderr()[-3000:]
    assert gone <= EXIT_BUDGET_S, f"stdio took {gone:.2f} s to exit after end of input; stderr:\n{stdio.stderr()[-3000:]}"
    assert [a["id"] for a in stdio.answers] == [1, 2]


def test_a_classification_pending_at_end_of_input_is_still_answered(stdio: StdioProcess) -> None:
    stdio.send(INITIALIZE)
    text = {"name": "classify_text", "arguments": {"text": "integrate x squared from 0 to 1"}}
    stdio.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": text})
    stdio.end_input()  # straight after the request: the model is still loading
    assert stdio.process.returncode == 0, stdio.stderr()[-3000:]
    classified = next((a for a in stdio.answers if a.get("id") == 2), None)
    assert classified is not None, f"the pending classification was lost; stderr:\n{stdio.stderr()[-3000:]}"
    assert classified["result"]["isError"] is False and classified["result"]["structuredContent"]["category"] == "math", classified
