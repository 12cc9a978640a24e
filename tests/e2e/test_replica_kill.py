"""One of two embedder replicas SIGKILLed under steady load: no request fails, throughput comes back.

The real stack: `serve --backend ray` (embedded Ray Serve, two single-CPU replicas, gRPC) under a
steady stream from 6 aiohttp clients for 30 s. At 8 s one replica process is killed outright.
Classification is idempotent, so the gateway retries a call whose replica died; Serve routes the
retry to the live one (and starts a replacement). The test reports the recovery time: from the
kill until three whole seconds in a row again average 80% of the rate before it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from tests.support.processes import start_server

pytestmark = pytest.mark.slow

CLIENTS = 6
LOAD_S = 40.0
KILL_AT_S = 8.0
RECOVERY_LIMIT_S = 30.0
TEXTS = [
    f"question {i}: how would you explain {topic} to a newcomer"
    for i, topic in enumerate(["recursion", "inflation", "photosynthesis", "tcp handshakes", "compound interest", "black holes"] * 20)
]


def replica_processes(gateway_pid: int) -> list[psutil.Process]:
    """The Serve replica actors of the embedded cluster (their process title names them)."""
    found = []
    for process in psutil.Process(gateway_pid).children(recursive=True):
        try:
            if "ServeReplica" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


async def steady_load(url: str, started: float) -> list[tuple[float, bool, str]]:
    outcomes: list[tuple[float, bool, str]] = []  # (seconds since start at the answer, ok, detail)
    async with aiohttp.ClientSession(base_url=url, timeout=aiohttp.ClientTimeout(total=60)) as http:

        async def client(offset: int) -> None:
            i = offset
            while time.monotonic() - started < LOAD_S:
                body = {"name": "classify_text", "arguments": {"text": TEXTS[i % len(TEXTS)]}}
                i += CLIENTS
                try:
                    async with http.post("/mcp/tools/call", json=body) as response:
                        payload = await response.json()
                        ok = response.status == 200 and payload.get("isError") is False
                        detail = "" if ok else f"{response.status} {str(payload)[:200]}"
                except (TimeoutError, aiohttp.ClientError) as exc:
                    ok, detail = False, repr(exc)
                outcomes.append((time.monotonic() - started, ok, detail))

        await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    return outcomes


def test_killing_a_replica_under_load_fails_no_request(tmp_path: Path) -> None:
    server = start_server(
        tmp_path,
        "--backend",
        "ray",
        "--no-cache",
        "--min-replicas",
        "2",
        "--max-replicas",
        "2",
        "--request-timeout-s",
        "20",
        env={"RAY_AUTH_MODE": "disabled"},
    )
    try:
        replicas = replica_processes(server.process.pid)
        assert len(replicas) == 2, [p.cmdline() for p in replicas]
        victim = replicas[0]
        started = time.monotonic()

        async def run() -> list[tuple[float, bool, str]]:
            load = asyncio.create_task(steady_load(server.url, started))
            await asyncio.sleep(KILL_AT_S)
            os.kill(victim.pid, signal.SIGKILL)
            return await load

        outcomes = asyncio.run(run())
    finally:
        server.stop()

    failures = [detail for _, ok, detail in outcomes if not ok]
    per_second = [sum(1 for t, ok, _ in outcomes if ok and s <= t < s + 1) for s in range(int(LOAD_S))]
    before = statistics.mean(per_second[2 : int(KILL_AT_S)])
    window = 3
    back = next(
        (s for s in range(int(KILL_AT_S), int(LOAD_S) - window + 1) if statistics.mean(per_second[s : s + window]) >= 0.8 * before), None
    )
    recovery_s = None if back is None else back + 1 - KILL_AT_S
    print(
        f"replica SIGKILLed at {KILL_AT_S:.0f} s under {CLIENTS} clients: {len(outcomes)} requests, {len(failures)} failed; "
        f"{before:.1f} req/s before, per second after: {per_second[int(KILL_AT_S) :]}; recovered in {recovery_s} s"
    )
    assert not failures, failures[:5]
    assert recovery_s is not None and recovery_s <= RECOVERY_LIMIT_S, per_second
