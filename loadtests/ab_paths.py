#!/usr/bin/env python
"""Two or more serving variants in alternating rounds, each against the first, driven by wrk.

Why this and not one bench_paths run: on a shared 2-core machine one run of a path moves by
±25% at 32 clients, and the path measured first tends to read better. A lever worth a few
percent shows only when the variants take turns: each round starts every variant's `serve` in
turn (the order reversed every other round), runs wrk at every client level, and stops it.
Each variant is then read against the first in the same round (paired ratios), so a minute
when the whole machine was slow moves both sides of a ratio alike.

The raw floor and raw lone text are measured once, in process, before any server starts (per
arithmetic, as in bench_paths), and printed beside every figure. Before each server start the raw
lone text is timed again (harness.host_speed): the last line shows how the host's speed moved from
round to round, and warns when it moved by more than 15%.

Variants are `serve` flags, optionally led by environment variables for that server alone
(the server's own processes, Ray's workers included, inherit them):
    python -m loadtests.ab_paths --rounds 4 --clients 1,8,32 \\
        --path ray='--backend ray' --path ray-spin='GOMP_SPINCOUNT=3000000 --backend ray'
Exits 1 if any request failed, 2 without wrk.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from loadtests.bench_paths import (
    Arithmetic,
    Reference,
    add_settle_flag,
    arithmetic_of,
    measure_reference,
    path_spec,
    reference_line,
    reference_settings,
    run_path,
)
from loadtests.harness.host_load import before_floor_note, other_load_line, other_load_now
from loadtests.harness.host_speed import HostReading, HostSpeedCheck, host_speed_line
from loadtests.harness.loadgen import HttpResult, client_levels
from loadtests.harness.queries import TEXTS
from loadtests.harness.tables import fmt
from loadtests.harness.wrk import Wrk, wrk_available

ENV_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Variant:
    """One way to start `serve`: its environment additions and its flags."""

    name: str
    env: dict[str, str]
    flags: str

    @classmethod
    def parse(cls, name: str, spec: str) -> Variant:
        """Leading NAME=VALUE tokens are environment, as in a shell; the rest are serve flags."""
        tokens = shlex.split(spec)
        env: dict[str, str] = {}
        while tokens and ENV_TOKEN.match(tokens[0]):
            key, _, value = tokens.pop(0).partition("=")
            env[key] = value
        return cls(name, env, shlex.join(tokens))


@contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """A variant's environment while its settings are read (MCP_CLASSIFIER_* ones change them)."""
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """Even rounds in the given order, odd rounds reversed: neither side is always first after a start."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


@dataclass
class Level:
    """One variant at one client count, over all rounds (index = round)."""

    rps: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    other_cpu_pct: list[float | None] = field(default_factory=list)  # other processes on the host, % of one core

    def add(self, result: HttpResult) -> None:
        self.rps.append(result.rps)
        self.p50_ms.append(result.p50_ms)
        self.p99_ms.append(result.p99_ms)
        self.failures.append(result.failures)
        self.other_cpu_pct.append(result.other_cpu_pct)


def paired(values: Sequence[float], baseline: Sequence[float]) -> tuple[float, int]:
    """The median of round-by-round ratios to the baseline, and in how many rounds the ratio was above 1."""
    ratios = [v / b for v, b in zip(values, baseline, strict=True) if b > 0]
    if not ratios:
        return float("nan"), 0
    return statistics.median(ratios), sum(r > 1 for r in ratios)


def render(
    variants: Sequence[Variant],
    arithmetics: dict[str, Arithmetic],
    references: dict[Arithmetic, Reference],
    levels: dict[str, dict[int, Level]],
    host_readings: Sequence[HostReading] = (),
    other_before_floor: float | None = None,
) -> str:
    """One row per variant and client count: every round, the median, its share of the floor, and the paired ratios;
    then how the host's speed moved from round to round (``host_readings``, in the first arithmetic), and what else
    ran on the host (``other_before_floor``, the checks and every level: host_load)."""
    base = variants[0].name
    lines = [reference_line(ref) for ref in references.values()]
    lines += [
        "",
        f"| variant | clients | req/s by round | median req/s | share of floor | share of the issue's floor | req/s vs {base} "
        f"(rounds higher) | p50 ms by round | median p50 ms | p50 vs {base} (rounds higher) | lone added to raw ms | errors |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for variant in variants:
        ref = references[arithmetics[variant.name]]
        for clients, level in sorted(levels[variant.name].items()):
            baseline = levels[base][clients]
            rps_median = statistics.median(level.rps)
            p50_median = statistics.median(level.p50_ms)
            if variant.name == base:
                rps_vs = p50_vs = "1"
            else:
                ratio, higher = paired(level.rps, baseline.rps)
                rps_vs = f"{ratio:.3f} ({higher}/{len(level.rps)})"
                ratio, higher = paired(level.p50_ms, baseline.p50_ms)
                p50_vs = f"{ratio:.3f} ({higher}/{len(level.p50_ms)})"
            lone_added = fmt(p50_median - ref.lone_ms) if clients == 1 else ""
            lines.append(
                f"| {variant.name} | {clients} | {', '.join(f'{v:.1f}' for v in level.rps)} | {rps_median:.1f} | "
                f"{rps_median / ref.floor:.2f} | {fmt(ref.issue_share(rps_median), 2)} | {rps_vs} | {', '.join(f'{v:.1f}' for v in level.p50_ms)} | {p50_median:.1f} | "
                f"{p50_vs} | {lone_added} | {sum(level.failures)} |"
            )
    if host_readings:
        lines += ["", host_speed_line(next(iter(references.values())).lone_ms, host_readings)]
    checks = [("before the floor", other_before_floor), *((r.label, r.other_cpu_pct) for r in host_readings)]
    serving = [
        (f"{name} at {clients} clients, round {index + 1}", pct)
        for name, by_clients in levels.items()
        for clients, level in by_clients.items()
        for index, pct in enumerate(level.other_cpu_pct)
    ]
    if other_line := other_load_line(checks, serving):
        lines += ["", other_line]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--path",
        type=path_spec,
        action="append",
        required=True,
        help="NAME='[ENV=V ...] serve flags' (two or more; the first is the baseline)",
    )
    parser.add_argument("--rounds", type=int, default=4, help="server starts per variant, alternating [default: 4]")
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per level [default: 8]")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each level [default: 3]")
    add_settle_flag(parser)
    parser.add_argument("--clients", type=client_levels, default=[1, 8, 32], help="connection counts [default: 1,8,32]")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="builtin:minilm", help="model of the floor and of every variant [default: builtin:minilm]")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="device of the in-process floor [default: auto]")
    parser.add_argument("--raw-seconds", type=float, default=5.0, help="seconds per raw floor measurement [default: 5]")
    parser.add_argument(
        "--texts",
        type=int,
        default=len(TEXTS),
        help=f"the first N of the bench's texts, for the floor, the host checks and wrk alike: fewer make a quicker run whose "
        f"medians rest on fewer texts [default: all {len(TEXTS)}]",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE as JSON")
    args = parser.parse_args(argv)
    if len(args.path) < 2 or len({name for name, _ in args.path}) != len(args.path):
        parser.error("give two or more --path with distinct names")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not 1 <= args.texts <= len(TEXTS):
        parser.error(f"--texts must be between 1 and {len(TEXTS)}")
    if not wrk_available():
        print("wrk is not on PATH (apt-get install wrk): it is the load generator of this benchmark", file=sys.stderr)
        return 2
    variants = [Variant.parse(name, spec) for name, spec in args.path]
    arithmetics: dict[str, Arithmetic] = {}
    for variant in variants:
        with environment(variant.env):
            arithmetics[variant.name] = arithmetic_of(variant.flags)
    texts = list(TEXTS[: args.texts])
    other_before_floor = other_load_now()
    if note := before_floor_note(other_before_floor):
        print(note, file=sys.stderr)
    references = {a: measure_reference(a, texts, args) for a in dict.fromkeys(arithmetics.values())}
    wrk = Wrk(texts)
    levels: dict[str, dict[int, Level]] = {v.name: {c: Level() for c in args.clients} for v in variants}
    by_name = {v.name: v for v in variants}
    host_check = HostSpeedCheck(reference_settings(next(iter(references)), args), texts)
    try:
        for round_index in range(args.rounds):
            for name in round_order(list(by_name), round_index):
                variant = by_name[name]
                label = f"round {round_index + 1}/{args.rounds}: {name}"
                host_check(label)
                for result in run_path(label, variant.flags, wrk, args, env=variant.env):
                    levels[name][result.clients].add(result)
    finally:
        host_check.close()
    print()
    print(render(variants, arithmetics, references, levels, host_check.readings, other_before_floor))
    if args.json:
        payload = {
            "rounds": args.rounds,
            "texts": len(texts),
            "references": {
                str(a): {"floor_texts_per_s": r.floor, "issue_floor_texts_per_s": r.issue_floor, "raw_lone_ms": r.lone_ms}
                for a, r in references.items()
            },
            "host_checks": [asdict(r) for r in host_check.readings],
            "other_cpu_pct_before_floor": other_before_floor,
            "variants": {
                v.name: {
                    "env": v.env,
                    "flags": v.flags,
                    "arithmetic": str(arithmetics[v.name]),
                    "levels": {str(c): asdict(lv) for c, lv in levels[v.name].items()},
                }
                for v in variants
            },
        }
        args.json.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    return 0 if all(sum(lv.failures) == 0 for per in levels.values() for lv in per.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
