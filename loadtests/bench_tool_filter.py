#!/usr/bin/env python
"""select_tools through the gateway at 10, 100 and 1,000 tools, cold and warm, beside the raw forward, in one run.

- raw: the in-process encoder embedding the same tool texts in one batched call (the floor a cold
  request cannot beat), measured before the server starts so neither competes for the cores;
- cold: every request carries tool texts never seen before (a fresh tag in each description), so
  every tool is embedded (one backend call) plus the query;
- warm: the same list every time: the tool vectors come from the in-process cache, only the query
  is embedded.
p50/p99 at 1 client (sequential) and 16 concurrent clients (warm only: cold at 16 clients measures
the model's throughput, not the filter). The published figures of LiteLLM's filter (hosted
embeddings) are printed beside for scale.

Then the warm rows again on a gateway with feedback from use on (`--tool-feedback`, its vectors in the
embedded Redis), after `--feedback-vectors` feedback posts have given every tool of the list that many
past-request vectors: what a request pays to read and weigh them.

Usage (from the repository root):
    python -m loadtests.bench_tool_filter [--requests 30] [--sizes 10,100,1000] [--feedback-vectors 3] [serve flags...]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from loadtests.harness.loadgen import JSON_HEADERS, percentile, run_event_loop, session_for
from loadtests.harness.servers import Server
from mcp_classifier.settings import Settings
from mcp_classifier.toolfilter.tool_ranking import tool_summary
from mcp_classifier.wiring import build_classifier

SEED_FIGURES = {10: "5–15 ms", 100: "50–150 ms", 1000: "500–1,500 ms"}  # LiteLLM's published latency, hosted embeddings
QUERIES = [
    "is it going to rain in Oslo this weekend",
    "open a bug about the login page",
    "share the Q3 budget with finance",
    "find the Q3 budget in drive and then share it with finance",  # two asks: ranked whole and by part
]
_tags = itertools.count()


def tools_of(n: int, tag: str = "") -> list[dict[str, Any]]:
    servers = ["github", "jira", "slack", "gmail", "drive", "calendar", "weather", "postgres", "stripe", "notion"]
    verbs = ["search", "get", "create", "update", "delete", "list", "comment on", "share", "archive", "export"]
    return [
        {
            "name": f"{servers[i % 10]}__{verbs[(i // 10) % 10].replace(' ', '_')}_{i}",
            "description": f"{verbs[(i // 10) % 10].capitalize()} items number {i} in {servers[i % 10]}{tag}.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": "the item id"}}},
        }
        for i in range(n)
    ]


def raw_forward_ms(sizes: Sequence[int], repeats: int) -> dict[int, float]:
    """Best-of-N time to embed each size's tool texts in-process, in one batched call."""
    encoder = build_classifier(Settings()).encoder
    out = {}
    for n in sizes:
        texts = [tool_summary(t, 8192) for t in tools_of(n, " (raw)")]  # what the filter embeds
        encoder.encode_documents(texts)  # warm-up
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            encoder.encode_documents(texts)
            best = min(best, time.perf_counter() - started)
        out[n] = best * 1000
    return out


async def measure(url: str, n: int, cold: bool, clients: int, requests: int) -> tuple[float, float, int]:
    warm_tools = tools_of(n)
    latencies: list[float] = []
    failures = 0
    async with session_for(url, clients) as session:
        if not cold:  # fill the cache once, untimed
            await session.post("/mcp/tools/call", data=_body(warm_tools, 0), headers=JSON_HEADERS)

        async def one_client(offset: int) -> None:
            nonlocal failures
            for i in range(offset, requests, clients):
                tools = tools_of(n, f" (run {next(_tags)})") if cold else warm_tools
                body = _body(tools, i)
                started = time.perf_counter()
                async with session.post("/mcp/tools/call", data=body, headers=JSON_HEADERS) as response:
                    payload = orjson.loads(await response.read())
                latencies.append(time.perf_counter() - started)
                if response.status != 200 or payload.get("isError") or not payload["structuredContent"]["filtered"]:
                    failures += 1

        await asyncio.gather(*(one_client(k) for k in range(clients)))
    return percentile(latencies, 50) * 1000, percentile(latencies, 99) * 1000, failures


FEEDBACK_CHUNK = 64  # tools named by one feedback post: the door's own limit


async def give_feedback(url: str, n: int, vectors: int) -> int:
    """Every tool of the warm list gets ``vectors`` past requests (one post per chunk of tools); the failed posts."""
    tools, failures = tools_of(n), 0
    async with session_for(url, 1) as session:
        for round_number in range(vectors):
            query = f"{QUERIES[round_number % len(QUERIES)]} (round {round_number})"
            for start in range(0, n, FEEDBACK_CHUNK):
                body = orjson.dumps({"query": query, "called": tools[start : start + FEEDBACK_CHUNK]})
                async with session.post("/v1/tools/feedback", data=body, headers=JSON_HEADERS) as response:
                    payload = orjson.loads(await response.read())
                failures += response.status != 200 or not payload.get("stored")
    return failures


def feedback_rows(sizes: Sequence[int], args: argparse.Namespace, serve_flags: Sequence[str]) -> list[tuple[int, Any, Any, int]]:
    """Warm p50/p99 at 1 and ``args.clients`` clients with feedback on and ``args.feedback_vectors`` vectors per tool."""
    server = Server(["--backend", "local", "--max-body-bytes", str(16 * 2**20), "--tool-feedback", *serve_flags])
    rows = []
    try:
        url = server.wait_ready()
        for n in sizes:
            seeded = run_event_loop(give_feedback(url, n, args.feedback_vectors))
            warm1 = run_event_loop(measure(url, n, False, 1, args.requests))
            warm16 = run_event_loop(measure(url, n, False, args.clients, args.requests * 2))
            rows.append((n, warm1, warm16, seeded))
            print(f"  {n} tools, feedback on: warm p50 {warm1[0]:.1f} ms", file=sys.stderr)
    finally:
        server.stop()
    return rows


def _body(tools: list[dict[str, Any]], i: int) -> bytes:
    return orjson.dumps({"name": "select_tools", "arguments": {"query": QUERIES[i % len(QUERIES)], "tools": tools}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--requests", type=int, default=30, help="requests per row [default: 30]")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients of the warm rows [default: 16]")
    parser.add_argument(
        "--feedback-vectors", type=int, default=3, help="past-request vectors per tool in the feedback-on rows; 0 skips them [default: 3]"
    )
    args, serve_flags = parser.parse_known_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print("raw in-process forward of the same tool texts:", file=sys.stderr)
    raw = raw_forward_ms(sizes, repeats=3)
    server = Server(["--backend", "local", "--max-body-bytes", str(16 * 2**20), *serve_flags])
    rows = []
    try:
        url = server.wait_ready()
        for n in sizes:
            cold = run_event_loop(measure(url, n, True, 1, max(5, args.requests // 3)))
            warm1 = run_event_loop(measure(url, n, False, 1, args.requests))
            warm16 = run_event_loop(measure(url, n, False, args.clients, args.requests * 2))
            rows.append((n, raw[n], cold, warm1, warm16))
            print(f"  {n} tools: cold p50 {cold[0]:.1f} ms, warm p50 {warm1[0]:.1f} ms", file=sys.stderr)
    finally:
        server.stop()
    print(
        f"| tools | raw forward ms | cold p50 / p99 ms (1 client) | cold / raw | warm p50 / p99 ms (1 client) | warm p50 / p99 ms ({args.clients} clients) | failures | LiteLLM published |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for n, raw_ms, cold, warm1, warm16 in rows:
        failures = cold[2] + warm1[2] + warm16[2]
        print(
            f"| {n} | {raw_ms:.1f} | {cold[0]:.1f} / {cold[1]:.1f} | {cold[0] / raw_ms:.2f}x | {warm1[0]:.1f} / {warm1[1]:.1f} "
            f"| {warm16[0]:.1f} / {warm16[1]:.1f} | {failures} | {SEED_FIGURES.get(n, '—')} |"
        )
    if args.feedback_vectors > 0:
        _print_feedback_rows(feedback_rows(sizes, args, serve_flags), rows, args)
    return 0


def _print_feedback_rows(feedback: list[tuple[int, Any, Any, int]], rows: list[tuple[Any, ...]], args: argparse.Namespace) -> None:
    warm_without = {row[0]: row[3] for row in rows}
    print()
    print(
        f"| tools | feedback on: warm p50 / p99 ms (1 client), {args.feedback_vectors} vectors per tool | off: warm p50 ms "
        f"| on: warm p50 / p99 ms ({args.clients} clients) | failures |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n, warm1, warm16, seeded in feedback:
        print(
            f"| {n} | {warm1[0]:.1f} / {warm1[1]:.1f} | {warm_without[n][0]:.1f} | {warm16[0]:.1f} / {warm16[1]:.1f} "
            f"| {seeded + warm1[2] + warm16[2]} |"
        )


if __name__ == "__main__":
    sys.exit(main())
