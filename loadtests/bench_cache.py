#!/usr/bin/env python
"""Cache-hit benchmark: the Redis cache-hit path through the gateway next to a no-op endpoint, in one run.

Starts a real `mcp-classifier serve --backend local` (cache on, its embedded redis-server unless
``--redis-url`` is passed through) on a free loopback port, warms the cache with every text of
the workload, then measures, interleaved so that a noisy neighbour hurts both sides alike:

  * single-client sequential latency (p50/p99) and rps, and
  * closed-loop throughput at 32 keep-alive clients (configurable),

for two requests on the same server and the same REST route family:

  * **cache hit**: ``POST /mcp/tools/call`` classify_text on a warmed text (edge checks, body read,
    JSON parse, tool-argument validation, Redis GET, decode, answer);
  * **no-op**: ``POST /mcp/ping`` with ``{}`` - the same middleware, body read, JSON parse and REST
    dispatch, and nothing else. Chosen over ``GET /health`` because /health asks the backend for
    its info (an IPC call with the process model worker) and skips the body path, so it is neither
    cheaper in the same way nor the same route shape; ping isolates exactly what the cache adds.

The issue's targets: hit p50 <= 2 ms single client; hit rps >= 60% of the no-op's at 32 clients.
The misses counter is read before and after each hit measurement: a single miss would mean the
model was on the measured path, and the run says so.

Usage:
    python -m loadtests.bench_cache [--duration 8] [--clients 32] [--rounds 2] [--json out.json] [serve flags...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp
import httpx
import orjson

from loadtests.harness.cpu import CpuMark, ProcessTree
from loadtests.harness.loadgen import JSON_HEADERS, body_of, percentile, run_event_loop, session_for
from loadtests.harness.queries import TEXTS
from loadtests.harness.servers import Server

P50_TARGET_MS = 2.0
RPS_RATIO_TARGET = 0.60


@dataclass
class Measurement:
    path: str  # "cache hit" or "no-op"
    clients: int
    requests: int
    failures: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    server_cpu_pct: float | None = None
    server_cpu_us_per_request: float | None = None  # gateway + its embedded redis-server, per answered request
    loadgen_cpu_pct: float | None = None
    misses_during: float | None = None
    failure_samples: list[str] = field(default_factory=list)


NOOP_BODY = b"{}"


async def _post(session: aiohttp.ClientSession, path: str, body: bytes) -> str | None:
    try:
        async with session.post(path, data=body, headers=JSON_HEADERS) as resp:
            content = await resp.read()
            status = resp.status
    except (TimeoutError, aiohttp.ClientError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if status != 200:
        return f"HTTP {status}: {content[:200]!r}"
    if path.endswith("tools/call") and b'"isError":false' not in content:
        return f"isError: {content[:200]!r}"
    return None


async def measure(url: str, name: str, path: str, bodies: Sequence[bytes], clients: int, duration: float, tree: ProcessTree) -> Measurement:
    """Closed loop: ``clients`` connections, each sending its next request as soon as the last answered."""
    latencies: list[float] = []
    failures: list[str] = []
    async with session_for(url, clients) as session:
        for i in range(clients * 3):  # warm-up: open every connection
            await _post(session, path, bodies[i % len(bodies)])
        mark0 = CpuMark.take(tree)
        started = time.perf_counter()
        deadline = started + duration

        async def client(offset: int) -> None:
            i = offset
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                err = await _post(session, path, bodies[i % len(bodies)])
                latencies.append(time.perf_counter() - t0) if err is None else failures.append(err)
                i += 1

        step = max(1, len(bodies) // clients)
        await asyncio.gather(*(client(k * step) for k in range(clients)))
        elapsed = time.perf_counter() - started
        mark1 = CpuMark.take(tree)
    server_cpu = None if mark0.server is None or mark1.server is None else 100.0 * (mark1.server - mark0.server) / elapsed
    return Measurement(
        path=name,
        clients=clients,
        requests=len(latencies),
        failures=len(failures),
        seconds=elapsed,
        rps=len(latencies) / elapsed,
        p50_ms=1000 * percentile(latencies, 50),
        p99_ms=1000 * percentile(latencies, 99),
        server_cpu_pct=server_cpu,
        server_cpu_us_per_request=None if server_cpu is None or not latencies else (mark1.server - mark0.server) / len(latencies) * 1e6,
        loadgen_cpu_pct=100.0 * (mark1.loadgen - mark0.loadgen) / elapsed,
        failure_samples=failures[:3],
    )


def metric(url: str, name: str) -> float:
    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rpartition(" ")[2])
    return total


async def warm(url: str, texts: Sequence[str]) -> None:
    """Classify every text once (misses, written behind), then check a second pass is all hits."""
    connector = aiohttp.TCPConnector(limit=8)
    async with aiohttp.ClientSession(base_url=url, connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as session:
        sem = asyncio.Semaphore(8)

        async def one(text: str) -> None:
            async with sem:
                err = await _post(session, "/mcp/tools/call", body_of(text))
                if err:
                    raise RuntimeError(f"warm-up failed: {err}")

        await asyncio.gather(*(one(t) for t in texts))
        await asyncio.sleep(0.5)  # write-behind SETs land
        misses = metric(url, "mcp_classifier_cache_misses_total")
        await asyncio.gather(*(one(t) for t in texts))
        if metric(url, "mcp_classifier_cache_misses_total") != misses:
            raise RuntimeError("the cache is not warm: a second pass over the texts still missed (is the cache on?)")


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def aggregate(runs: list[Measurement]) -> Measurement:
    """Rounds of one (path, clients) -> median of each figure (robust to one disturbed round)."""
    first = runs[0]
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731 - a one-line helper reads best as a lambda here
    return Measurement(
        path=first.path,
        clients=first.clients,
        requests=sum(r.requests for r in runs),
        failures=sum(r.failures for r in runs),
        seconds=sum(r.seconds for r in runs),
        rps=med([r.rps for r in runs]),
        p50_ms=med([r.p50_ms for r in runs]),
        p99_ms=med([r.p99_ms for r in runs]),
        server_cpu_pct=med([r.server_cpu_pct for r in runs if r.server_cpu_pct is not None]),
        server_cpu_us_per_request=med([r.server_cpu_us_per_request for r in runs if r.server_cpu_us_per_request is not None]),
        loadgen_cpu_pct=med([r.loadgen_cpu_pct for r in runs if r.loadgen_cpu_pct is not None]),
        misses_during=sum(r.misses_during or 0 for r in runs),
        failure_samples=[s for r in runs for s in r.failure_samples][:3],
    )


def table(results: dict[tuple[str, int], Measurement], clients: int) -> str:
    rows = [
        "| path | clients | requests | p50 ms | p99 ms | rps | hit/no-op rps | server CPU % | server CPU us/req | loadgen CPU % |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in (1, clients):
        noop, hit = results[("no-op", n)], results[("cache hit", n)]
        for m in (noop, hit):
            ratio = f"{m.rps / noop.rps:.2f}" if m is hit and noop.rps else ""
            label = "no-op `POST /mcp/ping {}`" if m is noop else "cache hit `POST /mcp/tools/call`"
            rows.append(
                f"| {label} | {n} | {m.requests} | {_fmt(m.p50_ms)} | {_fmt(m.p99_ms)} | {_fmt(m.rps, 0)} | {ratio} | "
                f"{_fmt(m.server_cpu_pct, 0)} | {_fmt(m.server_cpu_us_per_request, 0)} | {_fmt(m.loadgen_cpu_pct, 0)} |"
            )
    hit1, hitn, noopn = results[("cache hit", 1)], results[("cache hit", clients)], results[("no-op", clients)]
    ratio = hitn.rps / noopn.rps if noopn.rps else float("nan")
    verdicts = [
        f"- hit p50, 1 client: {hit1.p50_ms:.2f} ms (target <= {P50_TARGET_MS:g} ms): {'PASS' if hit1.p50_ms <= P50_TARGET_MS else 'FAIL'}",
        f"- hit rps at {clients} clients: {ratio:.0%} of the no-op's (target >= {RPS_RATIO_TARGET:.0%}): {'PASS' if ratio >= RPS_RATIO_TARGET else 'FAIL'}",
    ]
    return "\n".join(rows) + "\n\n" + "\n".join(verdicts)


async def run(url: str, tree: ProcessTree, args: argparse.Namespace) -> dict[tuple[str, int], Measurement]:
    texts = list(TEXTS)
    print(f"warming the cache with {len(texts)} texts", file=sys.stderr)
    await warm(url, texts)
    hit_bodies = [body_of(t) for t in texts]
    runs: dict[tuple[str, int], list[Measurement]] = {}
    for round_no in range(args.rounds):
        for n in (1, args.clients):
            for name, path, bodies in (("no-op", "/mcp/ping", [NOOP_BODY]), ("cache hit", "/mcp/tools/call", hit_bodies)):
                misses = metric(url, "mcp_classifier_cache_misses_total")
                m = await measure(url, name, path, bodies, n, args.duration, tree)
                m.misses_during = metric(url, "mcp_classifier_cache_misses_total") - misses
                runs.setdefault((name, n), []).append(m)
                print(
                    f"  round {round_no + 1}: {name:9s} {n:3d} client(s): {m.rps:7.0f} rps, p50 {m.p50_ms:.2f} ms, "
                    f"p99 {m.p99_ms:.2f} ms, failures {m.failures}, misses {m.misses_during:g}",
                    file=sys.stderr,
                )
    return {key: aggregate(ms) for key, ms in runs.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement [8]")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients of the throughput rows [32]")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the table shows medians [2]")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args, serve_flags = parser.parse_known_args(argv)
    server = Server(["--backend", "local", *serve_flags])
    try:
        url = server.wait_ready()
        health = httpx.get(f"{url}/health", timeout=10).json()
        if not health.get("cache", {}).get("enabled") or not health["cache"].get("redis", {}).get("up"):
            raise RuntimeError(f"the cache is not on: {health.get('cache')}")
        print(f"server {url}: cache via {health['cache']['redis']['mode']} Redis {health['cache']['redis']['url']}", file=sys.stderr)
        results = run_event_loop(run(url, server.tree, args))
    finally:
        server.stop()
    print(table(results, args.clients))
    bad = [m for m in results.values() if m.failures or (m.path == "cache hit" and m.misses_during)]
    for m in bad:
        print(
            f"WARNING: {m.path} x{m.clients}: {m.failures} failures, {m.misses_during:g} misses; e.g. {m.failure_samples}", file=sys.stderr
        )
    if args.json:
        args.json.write_text(orjson.dumps({f"{k[0]} x{k[1]}": asdict(v) for k, v in results.items()}, option=orjson.OPT_INDENT_2).decode())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
