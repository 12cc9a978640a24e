"""One of two embedder replicas SIGKILLed under steady load: no request fails, throughput comes back.

The real stack: `serve --backend ray` (embedded Ray Serve, two single-CPU replicas, gRPC) under a
steady stream from 6 aiohttp clients. At 8 s one replica process is killed outright.
Classification is idempotent, so the gateway retries a call whose replica died; Serve routes the
retry to the live one and starts a replacement once its health check finds the dead one. The test
reports the recovery time: from the kill until three whole seconds in a row again average 80% of
the rate before it.

How long recovery takes is mostly how long a replica takes to start (worker, imports, model,
category index), which is host-bound: 8 s on a Xeon with AMX, 19-24 s on a 2-core EPYC beside
the load. So the bound is this host's own: the replicas' start measured when the gateway came up,
plus the health check period and two replica-list refreshes. The part the product sets, the
replacement starting within one health check period of the kill, is bounded by that period plus a
worker's start, which also grows with the host's measured start.
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

pytestmark = [pytest.mark.slow, pytest.mark.embedded_ray]

CLIENTS = 6
KILL_AT_S = 8.0
HEALTH_CHECK_PERIOD_S = 2.0  # --replica-health-check-period-s, the default
REPLICA_REFRESH_S = 2.0  # --replica-refresh-s, the default: how soon the gateway finds the replacement
# Beyond one health check period: the controller's loop, and the raylet starting a worker that imports Ray and
# takes the replica's title (2-4 s on a 2-core EPYC under this load). Serve's default period alone is 10 s.
SPAWN_SLACK_S = 6.0
# Starting that worker is part of what a replica's start costs, so on a slower host the slack grows with the
# start measured here: a clean-clone run on a loaded host saw the replacement after 8.6 s with replicas that
# took 33.5 s to start (a 6 s slack alone allowed 8).
SPAWN_SLACK_SHARE_OF_START = 0.3
# A replacement starts beside a replica and gateway busy with the load, like the two replicas that started
# side by side at startup; half as long again covers the noise of a shared machine.
START_TIME_FACTOR = 1.5
RECOVERY_WINDOW_S = 3  # whole seconds in a row at 80% of the rate before the kill
POLL_S = 0.2
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


async def steady_load(url: str, started: float, load_s: float) -> list[tuple[float, bool, str]]:
    outcomes: list[tuple[float, bool, str]] = []  # (seconds since start at the answer, ok, detail)
    async with aiohttp.ClientSession(base_url=url, timeout=aiohttp.ClientTimeout(total=60)) as http:

        async def client(offset: int) -> None:
            i = offset
            while time.monotonic() - started < load_s:
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


def replica_start_s(replicas: list[psutil.Process], ready_at: float) -> float:
    """From the later replica process's creation to the gateway's /ready: one replica start on this host."""
    return ready_at - max(p.create_time() for p in replicas)


async def first_new_replica(gateway_pid: int, known: set[int], killed_at: float, give_up_s: float) -> float | None:
    """Seconds from the kill until Serve's replacement replica process exists (None: not within give_up_s)."""
    while time.monotonic() - killed_at < give_up_s:
        if any(p.pid not in known for p in replica_processes(gateway_pid)):
            return time.monotonic() - killed_at
        await asyncio.sleep(POLL_S)
    return None


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
        "--replica-health-check-period-s",
        str(HEALTH_CHECK_PERIOD_S),
        "--replica-refresh-s",
        str(REPLICA_REFRESH_S),
        env={"RAY_AUTH_MODE": "disabled"},
    )
    try:
        replicas = replica_processes(server.process.pid)
        assert len(replicas) == 2, [p.cmdline() for p in replicas]
        start_s = replica_start_s(replicas, time.time())
        spawn_limit_s = HEALTH_CHECK_PERIOD_S + max(SPAWN_SLACK_S, SPAWN_SLACK_SHARE_OF_START * start_s)
        recovery_limit_s = spawn_limit_s + START_TIME_FACTOR * start_s + 2 * REPLICA_REFRESH_S
        load_s = KILL_AT_S + recovery_limit_s + RECOVERY_WINDOW_S + 1
        victim = replicas[0]
        started = time.monotonic()

        async def run() -> tuple[list[tuple[float, bool, str]], float | None]:
            load = asyncio.create_task(steady_load(server.url, started, load_s))
            await asyncio.sleep(KILL_AT_S)
            os.kill(victim.pid, signal.SIGKILL)
            spawned = await first_new_replica(server.process.pid, {p.pid for p in replicas}, time.monotonic(), recovery_limit_s)
            return await load, spawned

        outcomes, spawned_s = asyncio.run(run())
    finally:
        server.stop()

    failures = [detail for _, ok, detail in outcomes if not ok]
    per_second = [sum(1 for t, ok, _ in outcomes if ok and s <= t < s + 1) for s in range(int(load_s))]
    before = statistics.mean(per_second[2 : int(KILL_AT_S)])
    back = next(
        (
            s
            for s in range(int(KILL_AT_S), int(load_s) - RECOVERY_WINDOW_S + 1)
            if statistics.mean(per_second[s : s + RECOVERY_WINDOW_S]) >= 0.8 * before
        ),
        None,
    )
    recovery_s = None if back is None else back + 1 - KILL_AT_S
    print(
        f"replica SIGKILLed at {KILL_AT_S:.0f} s under {CLIENTS} clients: {len(outcomes)} requests, {len(failures)} failed; "
        f"{before:.1f} req/s before, per second after: {per_second[int(KILL_AT_S) :]}; replacement process after {spawned_s} s "
        f"(limit {spawn_limit_s:.0f}); recovered in {recovery_s} s (limit {recovery_limit_s:.1f}: a replica started in {start_s:.1f} s here)"
    )
    assert not failures, failures[:5]
    assert spawned_s is not None and spawned_s <= spawn_limit_s, spawned_s
    assert recovery_s is not None and recovery_s <= recovery_limit_s, per_second
