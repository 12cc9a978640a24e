#!/usr/bin/env python
"""torch's OpenMP wait policy (``omp_wait_policy``): active against passive, on idle cores and beside busy ones.

Each row is a fresh child process (libgomp reads OMP_WAIT_POLICY once, when torch loads) that times the same
texts: one text alone through the encoder and through classify() (what a lone router request waits for), and
all of them as one batch (throughput). The busy rows run the same children beside ``--busy`` processes that
spin on a core each, as other tenants of a shared node do; every row is measured in this one run, so the
ratios compare like with like on a noisy host.

Usage (from the repository root):
    python -m loadtests.bench_omp_wait [--texts 32] [--rounds 3] [--busy N] [--model builtin:minilm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from loadtests.harness.queries import TEXTS
from loadtests.harness.tables import fmt
from mcp_classifier.settings import ModelSettings, Settings
from mcp_classifier.util.omp import OMP_SPIN_COUNT_ENV, OMP_WAIT_POLICY_ENV, OmpWaitPolicy

POLICIES: tuple[OmpWaitPolicy, ...] = ("active", "passive")
SPIN = "while True: pass"
CHILD_TIMEOUT_S = 1800  # beside busy cores an active child took 25 times its idle time


@dataclass(frozen=True)
class Row:
    host: str
    policy: str
    policy_in_force: str
    lone_forward_ms: float
    lone_classify_ms: float
    batch_texts_per_s: float


def measure_child(model: str, texts: Sequence[str], rounds: int) -> dict[str, object]:
    """Runs in the child: the lone and batch timings under the policy this process loaded torch with."""
    from loadtests.harness.floor import time_each_alone
    from mcp_classifier.wiring import build_classifier

    classifier = build_classifier(Settings(model=model))
    encoder = classifier.encoder
    encoder.encode_queries(list(texts))  # warm-up: allocator and kernel selection
    forward: list[float] = []
    classify: list[float] = []
    for _ in range(rounds):
        forward += time_each_alone(encoder.encode_queries, texts)
        classify += time_each_alone(classifier.classify, texts)
    started = time.perf_counter()
    for _ in range(rounds):
        encoder.encode_queries(list(texts))
    return {
        "policy_in_force": os.environ.get(OMP_WAIT_POLICY_ENV, ""),
        "lone_forward_ms": 1000 * statistics.median(forward),
        "lone_classify_ms": 1000 * statistics.median(classify),
        "batch_texts_per_s": rounds * len(texts) / (time.perf_counter() - started),
    }


def run_child(host: str, policy: OmpWaitPolicy, args: argparse.Namespace) -> Row:
    # The policy alone, as this bench compares it: a spin count inherited from the caller would blur the passive row.
    env = {**{k: v for k, v in os.environ.items() if k != OMP_SPIN_COUNT_ENV}, OMP_WAIT_POLICY_ENV: policy.upper()}
    command = [sys.executable, "-m", "loadtests.bench_omp_wait", "--child", "--texts", str(args.texts)]
    command += ["--rounds", str(args.rounds), "--model", args.model]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {policy} child failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    measured: dict[str, Any] = orjson.loads(done.stdout.strip().splitlines()[-1])
    return Row(host=host, policy=policy, **measured)


@contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each, ended by their own PIDs."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def render(rows: Sequence[Row]) -> str:
    active = {row.host: row for row in rows if row.policy == "active"}
    lines = [
        "| host | policy | OMP_WAIT_POLICY seen | lone forward p50 ms | lone classify p50 ms | batch texts/s | lone classify vs active |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = row.lone_classify_ms / active[row.host].lone_classify_ms if row.host in active else None
        lines.append(
            f"| {row.host} | {row.policy} | {row.policy_in_force} | {fmt(row.lone_forward_ms, 2)} | {fmt(row.lone_classify_ms, 2)} "
            f"| {fmt(row.batch_texts_per_s)} | {fmt(ratio, 2)}x |"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="torch's OpenMP wait policy, active against passive, idle and beside busy cores.")
    parser.add_argument("--texts", type=int, default=32, help="texts timed alone and as one batch [default: 32]")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the texts per row [default: 3]")
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 1, help="spinning processes beside the busy rows [default: one per CPU]"
    )
    parser.add_argument("--model", default=ModelSettings().name, help="the model [default: builtin:minilm]")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.texts < 1 or args.rounds < 1 or args.busy < 0:
        print("bench_omp_wait: --texts and --rounds must be at least 1, --busy at least 0", file=sys.stderr)
        return 2
    texts = [TEXTS[i % len(TEXTS)] for i in range(args.texts)]
    if args.child:
        print(orjson.dumps(measure_child(args.model, texts, args.rounds)).decode())
        return 0
    hosts = [("idle", 0)] + ([(f"beside {args.busy} busy", args.busy)] if args.busy else [])
    rows: list[Row] = []
    for host, busy in hosts:
        with busy_cores(busy):
            for policy in POLICIES:
                print(f"[bench] {host}: {policy}", file=sys.stderr, flush=True)
                rows.append(run_child(host, policy, args))
    print(f"model {args.model}, {args.texts} texts, {args.rounds} rounds, {os.cpu_count()} CPUs")
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
