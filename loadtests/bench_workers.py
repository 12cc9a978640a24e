#!/usr/bin/env python
"""Gateway workers side by side: req/s of `serve --workers N` for several N, in one run, rounds alternating.

One server per worker count, all started before measuring; each round measures every server once
with wrk (one thread, keep-alive clients, its own CPU a few percent of a core), in turn, so a noisy
neighbour hurts each count alike. Two paths:

  * ``--path hit`` (default): classify_text on texts warmed into the Redis cache. No model is on the
    measured path (the cache-miss counter is read around it, and a miss is reported), so this is the
    gateway's own cost: what more processes buy where the gateway, not the embedder, is the limit.
  * ``--path miss``: the whole path, every request classified by the embedder (pass ``--no-cache``),
    against the embedder's floor: the raw in-process forward on the same texts, measured first, in this run
    (loadtests/harness/floor.py). The share of the floor is req/s over floor texts/s.

On a 2-core host (the gateway, Redis and wrk share the cores):
    python -m loadtests.bench_workers --counts 1,2 --clients 32 --backend local
On a GPU host, the whole path with one GPU replica (the command docs/decisions/0036-gateway-workers.md gives):
    python -m loadtests.bench_workers --path miss --counts 1,2,4,8 --clients 32,64,256 --backend ray \\
        --model random:qwen3-embedding-0.6b --device cuda --replica-num-gpus 1 --min-replicas 1 --max-replicas 1 --no-cache
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx

from loadtests.harness.host_load import LoadMark
from loadtests.harness.queries import TEXTS
from loadtests.harness.servers import Server, add_serve_settings_flags, server_args_from
from loadtests.harness.wrk import Wrk, wrk_available

MISSES = re.compile(r"^mcp_classifier_cache_misses_total (\S+)$", re.MULTILINE)
READY = re.compile(r"mcp-classifier ready on ")
READY_WAIT_S = 900.0  # N workers load their models on the same cores: a loaded host needs long
TARGET_SHARE_256 = 0.70  # issue 53: >= 0.70 of the embedder's floor at 256 clients


@dataclass
class Cell:
    workers: int
    clients: int
    rps: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    failures: int = 0
    misses: float = 0.0


def _ints(value: str) -> list[int]:
    return [int(part) for part in value.split(",")]


def start(workers: int, serve_args: list[str]) -> Server:
    server = Server([*serve_args, "--workers", str(workers)])
    server.wait_ready(timeout_s=READY_WAIT_S)
    # /ready answers from the first worker up; the supervisor's one "ready on" line means all of them.
    deadline = time.monotonic() + READY_WAIT_S
    while not READY.search(server.log()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return server


def misses(url: str) -> float:
    found = MISSES.search(httpx.get(f"{url}/metrics", timeout=30).text)
    return float(found.group(1)) if found else 0.0


def warm(url: str) -> None:
    with httpx.Client(base_url=url, timeout=120) as client:
        for text in TEXTS:
            client.post("/mcp/tools/call", json={"name": "classify_text", "arguments": {"text": text}}).raise_for_status()


def floor_texts_per_s(args: argparse.Namespace) -> float:
    from loadtests.harness.floor import measure_raw
    from mcp_classifier.cli import settings_from_args

    results = measure_raw(settings_from_args(args), list(TEXTS), args.duration)
    return max(result.texts_per_s for result in results[:2])  # the better forward: the ratio never flatters the server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--counts", type=_ints, default=[1, 2], help="worker counts (serve --workers), comma-separated [1,2]")
    parser.add_argument("--clients", type=_ints, default=[32], help="wrk keep-alive connections, comma-separated [32]")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per measurement [8]")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each measures every server once [3]")
    parser.add_argument("--path", choices=["hit", "miss"], default="hit")
    add_serve_settings_flags(parser)
    args = parser.parse_args(argv)
    if not wrk_available():
        print("wrk is not installed (apt-get install -y wrk)", file=sys.stderr)
        return 2
    serve_args = server_args_from(args)
    floor = floor_texts_per_s(args) if args.path == "miss" else None
    uptime = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    mark = LoadMark.take()
    servers = {n: start(n, serve_args) for n in args.counts}
    try:
        for server in servers.values():
            if args.path == "hit":
                warm(server.url)
        wrk = Wrk(TEXTS)
        cells = {(n, c): Cell(n, c) for n in args.counts for c in args.clients}
        for _ in range(args.rounds):
            for clients in args.clients:
                for n, server in servers.items():
                    before = misses(server.url)
                    result = wrk.run(server.url, clients, args.duration, server.tree)
                    cell = cells[(n, clients)]
                    cell.rps.append(result.rps)
                    cell.p50_ms.append(result.p50_ms)
                    cell.failures += result.failures
                    cell.misses += misses(server.url) - before
    finally:
        for server in servers.values():
            server.stop()
    other = LoadMark.take().other_pct_since(mark)
    print(
        f"host: {uptime}; CPU of every process but this one (servers, wrk, the rest of the host): {other:.0f}% of a core"
        if other is not None
        else f"host: {uptime}"
    )
    base = {c: statistics.median(cells[(args.counts[0], c)].rps) for c in args.clients}
    floor_cols = " share of floor |" if floor else ""
    print(
        f"\npath: {args.path}; {args.rounds} rounds of {args.duration:g} s, alternating" + (f"; floor {floor:.0f} texts/s" if floor else "")
    )
    print(
        f"| workers | clients | req/s (median) | req/s per round | vs {args.counts[0]} worker(s) | p50 ms |{floor_cols} failures | misses |"
    )
    print("|---|---|---|---|---|---|" + ("---|" if floor else "") + "---|---|")
    for (n, c), cell in cells.items():
        rps = statistics.median(cell.rps)
        share = f" {rps / floor:.2f} |" if floor else ""
        rounds = ", ".join(f"{r:.0f}" for r in cell.rps)
        p50 = statistics.median(cell.p50_ms)
        print(f"| {n} | {c} | {rps:.0f} | {rounds} | {rps / base[c]:.2f}x | {p50:.1f} |{share} {cell.failures} | {cell.misses:.0f} |")
    if floor and 256 in args.clients:
        best = max(statistics.median(cells[(n, 256)].rps) for n in args.counts)
        print(f"\nbest share of the floor at 256 clients: {best / floor:.2f} (target >= {TARGET_SHARE_256:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
