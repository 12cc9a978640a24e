"""What the tests share: paths, the protocol's validation rules, waiting helpers.

Servers and fakes live beside this file: `processes` (real gateway processes on free ports),
`fake_backend` (an in-process backend with no model, for the unit floor), `categories` (category
files derived from the packaged default), `redis_server`, `otlp_receiver`, `tcp_forwarder` and
`tiny_models` (a tiny Qwen3 built on the spot).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
PEER_DIR = REPO_ROOT.parent / "shared" / "peer" / "semantic-router"
DEFAULT_MAX_BODY_BYTES = 1_048_576  # settings.max_body_bytes default: 1 MiB
API_KEY_IN_FILE = "gamma-key-from-file-4d1a"  # the key the `keys_file` fixture writes


def assert_valid_classification(result: dict[str, Any], n_categories: int) -> None:
    """The protocol's validation rules (docs/protocol.md, "Tools") that every classify_text answer must meet."""
    assert isinstance(result["class"], int) and 0 <= result["class"] < n_categories, result
    assert 0.0 <= result["confidence"] <= 1.0, result
    assert isinstance(result["model"], str) and result["model"], result
    assert isinstance(result["use_reasoning"], bool), result
    if "probabilities" in result:
        probs = result["probabilities"]
        assert len(probs) == n_categories, result
        assert all(0.0 <= p <= 1.0 for p in probs), result
        assert abs(sum(probs) - 1.0) <= 0.01, result
        if result.get("in_scope", True):
            assert result["confidence"] >= max(probs) * 0.9, result
        else:  # out of scope, or in a language the model does not read: never surer than the category alone
            assert result["confidence"] <= max(probs) + 1e-9, result
        assert result["entropy"] >= 0.0, result
    if "language" in result:
        assert isinstance(result["language"], str) and isinstance(result["language_served"], bool), result
        assert result["language_served"] or result["in_scope"] is False, result


def wait_for(predicate: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.05) -> bool:
    """Poll until ``predicate()`` is truthy; False when the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())


async def async_wait_for(predicate: Callable[[], object], timeout_s: float = 10.0, interval_s: float = 0.02) -> bool:
    """wait_for inside an event loop: the loop keeps running the work being waited on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(interval_s)
    return bool(predicate())


def closed_port() -> int:
    """A loopback port nothing listens on: bound by the OS, then released (for 'service down' cases)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each event in a legacy SSE stream's lines, in order: the endpoint first, then the answers."""
    async for line in lines:
        if line.startswith("data: "):
            yield line.removeprefix("data: ")
