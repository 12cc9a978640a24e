#!/usr/bin/env python
"""The router's remote-classifier door: what ``POST /classify`` costs over the MCP tool, and what a classifier weighs.

Two measurements, each printed as a table:

1. **Latency on a cache hit**, one real ``serve --backend local`` (cache on), warmed with every text, then one
   client in turn on three requests, interleaved round by round so a noisy neighbour hurts each alike:
   ``POST /mcp/ping {}`` (the floor: edge, body, JSON, dispatch), ``POST /mcp/tools/call`` classify_text (the REST
   tool) and ``POST /classify {"inputs": text}`` (the router's door). Target: /classify's p50 at most
   ``--added-ms`` (1 ms) over the REST tool's. The cache misses counter is read around each row: a miss would put
   the model on the measured path, and the run says so.
2. **What a second classifier weighs** on a process that holds the model (a replica, or the local backend): the
   model and the default classifier are built, used and settled (gc, malloc_trim), RSS read; then a generated
   classifier of ``--categories`` x ``--examples`` (100 x 8) is built the registry's way on the same model and used,
   settled, RSS read again. A third one of the same size is added too: its increment is the steady cost with
   every one-time import and allocator pool already paid. Target: at most ``--added-mb`` (10 MB) for the second.
   Each size runs in a fresh child process.

Usage:
    python -m loadtests.bench_router_classify [--duration 4] [--rounds 3] [--categories 100] [--examples 8]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import httpx
import orjson
import psutil
import yaml

from loadtests.bench_cache import NOOP_BODY, Measurement, aggregate, measure, metric, warm
from loadtests.harness.cpu import ProcessTree
from loadtests.harness.loadgen import body_of, run_event_loop
from loadtests.harness.queries import TEXTS
from loadtests.harness.servers import Server

ADDED_MS_TARGET = 1.0
ADDED_MB_TARGET = 10.0
MIB = 1024 * 1024
# Words the generated classifiers are written from: enough of them that 800 examples are 800 different texts.
TOPICS = "billing shipping refunds passwords invoices contracts payroll tickets backups servers".split()
ACTIONS = "reset cancel explain compare schedule export renew update check transfer".split()
OBJECTS = "account order plan report device license booking subscription profile payment".split()
MISSES = "mcp_classifier_cache_misses_total"
DEFAULT_NAME = "default"


def generated_classifier(categories: int, examples: int) -> dict[str, object]:
    """A categories file of the size asked, with distinct, sentence-like examples (no two texts alike)."""
    rows = []
    for c in range(categories):
        topic = f"{TOPICS[c % len(TOPICS)]} {c}"
        texts = [
            f"how do I {ACTIONS[(c + e) % len(ACTIONS)]} the {OBJECTS[(c * 3 + e) % len(OBJECTS)]} for {topic}, case {e}"
            for e in range(examples)
        ]
        rows.append({"name": f"topic_{c:03d}", "description": f"Requests about {topic}.", "examples": texts})
    return {"detect_out_of_scope": False, "categories": rows}


async def _latency_rows(url: str, tree: ProcessTree, args: argparse.Namespace) -> dict[str, Measurement]:
    texts = list(TEXTS)
    await warm(url, texts)  # the REST tool's entries; /classify reads the same ones (its answers are not cached apart)
    paths = {
        "no-op `POST /mcp/ping`": ("/mcp/ping", [NOOP_BODY]),
        "REST tool `POST /mcp/tools/call`": ("/mcp/tools/call", [body_of(t) for t in texts]),
        "router `POST /classify`": ("/classify", [orjson.dumps({"inputs": t}) for t in texts]),
    }
    runs: dict[str, list[Measurement]] = {}
    for round_no in range(args.rounds):
        for name, (path, bodies) in paths.items():
            misses = metric(url, MISSES)
            m = await measure(url, name, path, bodies, 1, args.duration, tree)
            m.misses_during = metric(url, MISSES) - misses
            runs.setdefault(name, []).append(m)
            print(f"  round {round_no + 1}: {name}: p50 {m.p50_ms:.3f} ms, misses {m.misses_during:g}", file=sys.stderr)
    return {name: aggregate(ms) for name, ms in runs.items()}


def latency_table(rows: dict[str, Measurement], added_ms: float) -> tuple[str, bool]:
    lines = ["| request (1 client, cache hit) | requests | p50 ms | p99 ms | rps | misses |", "|---|---|---|---|---|---|"]
    for name, m in rows.items():
        lines.append(f"| {name} | {m.requests} | {m.p50_ms:.3f} | {m.p99_ms:.3f} | {m.rps:.0f} | {m.misses_during or 0:g} |")
    tool, router = rows["REST tool `POST /mcp/tools/call`"], rows["router `POST /classify`"]
    added = router.p50_ms - tool.p50_ms
    ok = added <= added_ms and not any(m.failures or m.misses_during for m in rows.values())
    verdict = f"- /classify adds {added:+.3f} ms p50 over the REST tool (target <= {added_ms:g} ms): {'PASS' if ok else 'FAIL'}"
    return "\n".join(lines) + "\n\n" + verdict, ok


def _settled_rss() -> int:
    """RSS once freed memory went back: a collection, then glibc's trim (freed heap otherwise stays counted)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the figure keeps what the allocator holds
        pass
    return psutil.Process().memory_info().rss


def measure_classifier_weight(categories: int, examples: int) -> dict[str, float]:
    """In this process: the model and default, then two generated classifiers, each built and used; RSS after each."""
    import functools

    from mcp_classifier.classify.build import classifier_on, load_model
    from mcp_classifier.classify.registry import CategorySource
    from mcp_classifier.settings import Settings

    settings = Settings(model="builtin:minilm", start_cache=False)  # every index embedded here, none read from disk
    folder = Path(tempfile.mkdtemp(prefix="bench-classifier-"))
    sources = {DEFAULT_NAME: CategorySource()}
    for name in ("second", "third"):
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(generated_classifier(categories, examples), sort_keys=False))
        sources[name] = CategorySource(path)
    configs = {name: source.load() for name, source in sources.items()}
    model = load_model(settings, instruction=configs[DEFAULT_NAME].instruction)
    build = functools.partial(classifier_on, model, settings.categories)
    held = []  # every classifier stays alive, as in a replica's registry
    rss = {}
    for name, config in configs.items():  # one at a time, in order: each row is what that classifier added
        held.append(build(config))
        held[-1].classify(list(TEXTS[:16]))
        rss[name] = _settled_rss() / MIB
    return rss


def weight_table(rss: dict[str, float], categories: int, examples: int, added_mb: float) -> tuple[str, bool]:
    second, third = rss["second"] - rss[DEFAULT_NAME], rss["third"] - rss["second"]
    lines = [
        "| process holds | RSS MiB | added MiB |",
        "|---|---|---|",
        f"| the model and `default` | {rss[DEFAULT_NAME]:.1f} | |",
        f"| + a second classifier, {categories} x {examples} | {rss['second']:.1f} | {second:+.1f} |",
        f"| + a third, {categories} x {examples} | {rss['third']:.1f} | {third:+.1f} |",
    ]
    ok = second <= added_mb
    verdict = (
        f"- a second classifier of {categories} x {examples} adds {second:.1f} MiB (target <= {added_mb:g} MB): {'PASS' if ok else 'FAIL'}"
    )
    return "\n".join(lines) + "\n\n" + verdict, ok


def replica_native_env() -> dict[str, str]:
    """What a replica's torch loads under (the CLI and the Serve config set it): the default wait and MKL's buffers."""
    from mcp_classifier.settings import Settings
    from mcp_classifier.util.omp import omp_env

    engine = Settings().engine
    return omp_env(engine.omp_wait_policy, engine.omp_spin_count)


def _weigh_in_child(categories: int, examples: int) -> dict[str, float]:
    """A fresh process, so what the latency server or an earlier build left in this one is not counted."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtests.bench_router_classify",
            "--weigh-only",
            "--categories",
            str(categories),
            "--examples",
            str(examples),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **replica_native_env(), "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the weighing child failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per latency row [4]")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table shows medians [3]")
    parser.add_argument("--categories", type=int, default=100, help="categories of the generated classifier [100]")
    parser.add_argument("--examples", type=int, default=8, help="examples per category [8]")
    parser.add_argument("--added-ms", type=float, default=ADDED_MS_TARGET, help="target: /classify's p50 over the tool's [1]")
    parser.add_argument("--added-mb", type=float, default=ADDED_MB_TARGET, help="target: a second classifier's RSS [10]")
    parser.add_argument("--weigh-only", action="store_true", help=argparse.SUPPRESS)  # the child of measurement 2
    args, serve_flags = parser.parse_known_args(argv)
    if args.weigh_only:
        print(json.dumps(measure_classifier_weight(args.categories, args.examples)))
        return 0
    server = Server(["--backend", "local", *serve_flags])
    try:
        url = server.wait_ready()
        if not httpx.get(f"{url}/health", timeout=10).json().get("cache", {}).get("enabled"):
            raise RuntimeError("the cache is off: this bench measures cache hits")
        assert server.tree is not None
        rows = run_event_loop(_latency_rows(url, server.tree, args))
    finally:
        server.stop()
    latency, latency_ok = latency_table(rows, args.added_ms)
    weight, weight_ok = weight_table(_weigh_in_child(args.categories, args.examples), args.categories, args.examples, args.added_mb)
    print(latency + "\n\n" + weight)
    return 0 if latency_ok and weight_ok else 1


if __name__ == "__main__":
    sys.exit(main())
