"""A light closed-loop HTTP load generator (aiohttp) for micro-benchmarks.

Why not Locust here: on this 2-core host the generator shares the cores with the server under
test, and Locust's per-request cost (gevent, stats, validation) takes a visible share of them,
lowering the very figure being measured. Capacity runs with realistic traffic use Locust
(`mcp-classifier loadtest`); these scripts measure the server's ceiling against the raw floor.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from .cpu import CpuMark, ProcessTree


@dataclass
class HttpResult:
    """One HTTP measurement (sequential or N concurrent clients) over the measured window only."""

    name: str
    clients: int
    ok: int
    failures: int
    seconds: float
    rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    server_cpu_pct: float | None = None
    loadgen_cpu_pct: float | None = None
    other_cpu_pct: float | None = None
    failure_samples: list[str] = field(default_factory=list)


def percentile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); NaN for no samples, so a dead level shows as such."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def body_of(text: str) -> bytes:
    return orjson.dumps({"name": "classify_text", "arguments": {"text": text}})


async def _call(client: aiohttp.ClientSession, body: bytes) -> str | None:
    """One classify_text call; None on success, else a short failure description.

    Deliberately lean (aiohttp, status check + one parse, no schema validation): the load
    generator shares the cores with the server, and every cycle it burns is taken from the
    server. httpx cost about 2.5 ms of CPU per request here, aiohttp far less.
    """
    try:
        async with client.post("/mcp/tools/call", data=body, headers=JSON_HEADERS) as resp:
            content = await resp.read()
            status = resp.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if status != 200:
        return f"HTTP {status}: {content[:200]!r}"
    try:
        if orjson.loads(content).get("isError") is not False:
            return f"isError: {content[:200]!r}"
    except orjson.JSONDecodeError:
        return f"bad JSON: {content[:200]!r}"
    return None


JSON_HEADERS = {"content-type": "application/json"}


def session_for(url: str, connections: int) -> aiohttp.ClientSession:
    """HTTP/1.1 keep-alive pool sized to the number of clients: one connection each."""
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
    return aiohttp.ClientSession(base_url=url, connector=connector, timeout=aiohttp.ClientTimeout(total=60.0))


async def run_sequential(url: str, bodies: Sequence[bytes], requests: int, tree: ProcessTree) -> HttpResult:
    """Requests one at a time on one connection: latency with no queueing and no batching."""
    failures: list[str] = []
    latencies: list[float] = []
    async with session_for(url, 1) as client:
        for i in range(min(10, len(bodies))):  # warm-up: connection setup, first-request costs
            await _call(client, bodies[i])
        mark0 = CpuMark.take(tree)
        started = time.perf_counter()
        for i in range(requests):
            t0 = time.perf_counter()
            err = await _call(client, bodies[i % len(bodies)])
            if err is None:
                latencies.append(time.perf_counter() - t0)
            else:
                failures.append(err)
        elapsed = time.perf_counter() - started
        mark1 = CpuMark.take(tree)
    return _result("sequential", 1, latencies, failures, elapsed, mark0, mark1)


async def run_concurrent(url: str, bodies: Sequence[bytes], clients: int, duration: float, warmup: float, tree: ProcessTree) -> HttpResult:
    """N closed-loop clients for warm-up + duration; only completions inside the window count."""
    failures: list[str] = []
    latencies: list[float] = []
    loop_start = time.perf_counter()
    window_start = loop_start + warmup
    window_end = window_start + duration
    cpu_marks: dict[str, CpuMark] = {}

    async def mark_cpu() -> None:
        # Sample CPU at the window edges, not at task start, so warm-up is excluded.
        await asyncio.sleep(max(0.0, window_start - time.perf_counter()))
        cpu_marks["start"] = CpuMark.take(tree)
        await asyncio.sleep(max(0.0, window_end - time.perf_counter()))
        cpu_marks["end"] = CpuMark.take(tree)

    async def one_client(client: aiohttp.ClientSession, offset: int) -> None:
        i = offset
        while time.perf_counter() < window_end:
            t0 = time.perf_counter()
            err = await _call(client, bodies[i % len(bodies)])
            t1 = time.perf_counter()
            i += 1
            if err is not None:
                failures.append(err)
            elif window_start <= t1 <= window_end:
                latencies.append(t1 - t0)

    async with session_for(url, clients) as client:
        step = max(1, len(bodies) // clients)
        await asyncio.gather(mark_cpu(), *(one_client(client, k * step) for k in range(clients)))
    name = f"{clients} client{'s' if clients > 1 else ''}"
    return _result(name, clients, latencies, failures, duration, cpu_marks["start"], cpu_marks["end"])


def _result(
    name: str,
    clients: int,
    latencies: list[float],
    failures: list[str],
    seconds: float,
    start: CpuMark,
    end: CpuMark,
) -> HttpResult:
    def pct(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None or seconds <= 0 else 100.0 * (b - a) / seconds

    server_pct = pct(start.server, end.server)
    loadgen_pct = pct(start.loadgen, end.loadgen)
    host_pct = pct(start.host, end.host)
    other_pct = None if host_pct is None or server_pct is None or loadgen_pct is None else max(0.0, host_pct - server_pct - loadgen_pct)
    return HttpResult(
        name=name,
        clients=clients,
        ok=len(latencies),
        failures=len(failures),
        seconds=seconds,
        rps=len(latencies) / seconds if seconds > 0 else 0.0,
        p50_ms=percentile(latencies, 50) * 1000,
        p95_ms=percentile(latencies, 95) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        server_cpu_pct=server_pct,
        loadgen_cpu_pct=loadgen_pct,
        other_cpu_pct=other_pct,
        failure_samples=sorted(set(failures))[:5],
    )


async def run_http(url: str, texts: Sequence[str], args: argparse.Namespace, tree: ProcessTree) -> list[HttpResult]:
    bodies = [body_of(t) for t in texts]  # encoded once: keeps the hot loop to send + parse
    results = [await run_sequential(url, bodies, args.sequential_requests, tree)]
    print(f"  sequential: p50 {results[-1].p50_ms:.1f} ms, p95 {results[-1].p95_ms:.1f} ms", file=sys.stderr)
    for n in args.clients:
        results.append(await run_concurrent(url, bodies, n, args.duration, args.warmup, tree))
        r = results[-1]
        print(f"  {r.name}: {r.rps:.1f} req/s, p50 {r.p50_ms:.1f} ms, p99 {r.p99_ms:.1f} ms, failures {r.failures}", file=sys.stderr)
    return results


def run_event_loop(coro: Any) -> Any:
    """uvloop when present: a cheaper loop leaves more of the 2 cores to the server under test."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def client_levels(value: str) -> list[int]:
    levels = [int(v) for v in value.split(",") if v.strip()]
    if not levels or any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError("expected a comma-separated list of positive integers, e.g. 1,8,32")
    return levels
