"""Gateway -> Ray Serve throughput in one run: (a) raw in-process floor, (b) batching on, (c) batch size 1.

Uses the harness's server runner and aiohttp load generator (loadtests/harness) so the three rows are measured the
same way. Targets (issue 3, builtin:minilm, 2 cores): (b) >= 1.8x (c) at 32 clients, and
(b) >= 50% of (a) at saturation.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from loadtests.harness.floor import measure_raw
from loadtests.harness.loadgen import HttpResult, client_levels, run_event_loop, run_http
from loadtests.harness.queries import TEXTS
from loadtests.harness.servers import Server
from loadtests.harness.tables import fmt, render_cpu_table
from mcp_classifier.settings import Settings


def run_variant(name: str, server_args: list[str], texts: Sequence[str], args: argparse.Namespace) -> list[HttpResult]:
    print(f"[{name}] serve {' '.join(server_args)}", file=sys.stderr)
    server = Server(server_args)
    try:
        url = server.wait_ready()
        return run_event_loop(run_http(url, texts, args, server.tree))
    finally:
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--clients", type=client_levels, default=[1, 8, 32, 64])
    parser.add_argument("--sequential-requests", type=int, default=100)
    parser.add_argument("--raw-seconds", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--extra", default="", help="more serve flags for both Ray variants, e.g. '--torch-threads 1'")
    args = parser.parse_args(argv)
    texts = list(TEXTS)
    extra = args.extra.split()

    print("(a) raw in-process floor", file=sys.stderr)
    raw = measure_raw(Settings(batch_size=args.batch_size), texts, args.raw_seconds)
    floor_row = max(raw[:2], key=lambda r: r.texts_per_s)  # fixed chunks or the encoder's own batching: the stricter
    floor = floor_row.texts_per_s
    batched = run_variant(
        "(b) ray, batching", ["--backend", "ray", "--no-cache", "--batch-size", str(args.batch_size), *extra], texts, args
    )
    unbatched = run_variant("(c) ray, max_batch_size 1", ["--backend", "ray", "--no-cache", "--batch-size", "1", *extra], texts, args)

    print(
        f"\nbuiltin:minilm, {len(texts)} texts, {os.cpu_count()} CPUs; (a) raw forward floor {floor:.1f} texts/s "
        f"({floor_row.name}; fastest pass {floor_row.best_pass_texts_per_s:.1f})\n"
    )
    print("| clients | (b) batching rps | p50 / p99 ms | (c) batch 1 rps | p50 / p99 ms | (b)/(c) | (b)/(a) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for b, c in zip(batched, unbatched):
        label = "seq" if b.name == "sequential" else str(b.clients)
        print(
            f"| {label} | {b.rps:.1f} | {fmt(b.p50_ms)} / {fmt(b.p99_ms)} | {c.rps:.1f} | "
            f"{fmt(c.p50_ms)} / {fmt(c.p99_ms)} | {b.rps / c.rps:.2f}x | {100 * b.rps / floor:.0f}% |"
        )
    at32 = [(b, c) for b, c in zip(batched, unbatched) if b.clients == 32 and b.name != "sequential"]
    saturation = max(batched[1:], key=lambda h: h.rps)
    if at32:
        b, c = at32[0]
        print(f"\n(b)/(c) at 32 clients: {b.rps / c.rps:.2f}x (target >= 1.8x) -> {'PASS' if b.rps / c.rps >= 1.8 else 'MISS'}")
    print(
        f"(b) at saturation ({saturation.name}) / (a): {saturation.rps / floor:.0%} (target >= 50%) -> "
        f"{'PASS' if saturation.rps / floor >= 0.5 else 'MISS'}"
    )
    failures = sum(h.failures for h in batched + unbatched)
    print(f"failures: {failures}")
    print("\nCPU during (b):\n" + render_cpu_table([], batched))
    return 0


if __name__ == "__main__":
    sys.exit(main())
