#!/usr/bin/env python
"""Every serving path against the raw forward, in one run, driven by wrk (a C load generator).

Measures first, in this process and before any server starts:
  * the raw floor: length-sorted batches of ``--batch-size`` over the benchmark's router-style
    queries (5-40 words), texts/s (the higher of fixed chunks and the encoder's own plan); every
    share is also given of the issue's own floor, the padded fixed chunks' fastest pass, which does
    not have the packed batching the server runs (so that share credits the server with it);
  * the raw lone text: median ms of one text through tokenise + forward + pool (the targets' reference),
    and through the whole classify() a served request runs (token matches and scoring too: about
    2 ms more on a 2-core CPU), so the second table also shows what the serving layer alone adds;
  * the arrival-order ceiling: the same texts in a fixed shuffle, cut into batches of min(clients,
    ``--batch-size``) unsorted, as a server at that many clients gets them. No path can beat it on
    these texts, so a path's share of it is what the serving layer itself costs.
Then, for each path (a real `serve` process each, cache off), wrk at every client level: req/s,
its share of the floor, p50/p99 and errors; and a second table of what a lone request adds to
the raw lone text. The three in-process figures are measured once per arithmetic the paths' models
run in (``--dtype``, and ``--fp16-weights-max-tokens`` on a CPU in fp32, from a path's flags, else
the defaults), and each path is read against its own: a bf16 path against an fp32 floor, or a lone
request on fp16 weights against a lone text on fp32 ones, would credit the serving layer with the
model's speed-up.
Paths are `serve` flag sets (``--path NAME='FLAGS'``), so a lever is measured by running the
same path with and without its flag, side by side.
Before each path's server starts, and after the last, the raw lone text is timed again in process
(harness.host_speed; a second on a CPU, skipped on a GPU): a shared host's speed moves within a run
where no process inside it shows, and the output's last line lists the checks and warns when they
spread by more than 15%.

Targets (issue 15, builtin:minilm, 2 cores, load generator included): Ray at 32 clients >= 0.70 of
the floor, local >= 0.80; a lone request adds <= 3 ms (local) and <= 10 ms (Ray); 0 errors.

Usage (from the repository root; needs `wrk` on PATH, e.g. `apt-get install wrk`):
    python -m loadtests.bench_paths [--duration 10] [--clients 1,8,32,64] [--json out.json]
        [--path local='--backend local'] [--path ray='--backend ray'] ...
On a GPU host, the whole gateway -> Ray path with Qwen3-Embedding-0.6B's architecture (random weights):
    python -m loadtests.bench_paths --model random:qwen3-embedding-0.6b --clients 1,8,32,64,256 \
        --path ray-gpu='--backend ray --replica-num-gpus 1 --min-replicas 1 --max-replicas 1 --ray-num-cpus 8'
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from loadtests.harness.floor import RawResult, measure_arrival_order, measure_lone, measure_raw
from loadtests.harness.host_load import before_floor_note, other_load_line, other_load_now
from loadtests.harness.host_speed import HostReading, HostSpeedCheck, host_speed_line
from loadtests.harness.loadgen import HttpResult, client_levels
from loadtests.harness.queries import TEXTS
from loadtests.harness.servers import Server
from loadtests.harness.tables import fmt
from loadtests.harness.wrk import Wrk, wrk_available
from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import Settings

DEFAULT_PATHS = {"local": "--backend local", "ray": "--backend ray"}
THROUGHPUT_TARGETS = {"local": 0.80, "ray": 0.70}  # share of the raw floor at 32 clients
LONE_TARGETS_MS = {"local": 3.0, "ray": 10.0}  # added to the raw lone text at 1 client


def path_spec(value: str) -> tuple[str, str]:
    name, sep, flags = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME='serve flags', e.g. ray-plain='--backend ray --no-ray-throughput-optimized'")
    return name, flags


def path_settings(flags: str) -> Settings:
    """The settings a path's `serve` process starts with: its flags read by serve's own parser, over env and defaults."""
    return settings_from_args(build_parser().parse_args(["serve", *shlex.split(flags)]))


def backend_of(flags: str) -> str:
    return path_settings(flags).serving.backend


@dataclass(frozen=True)
class Arithmetic:
    """How a path's model multiplies: its dtype, and up to how many tokens a call takes fp16 weights (CPU fp32 only)."""

    dtype: str
    fp16_weights_max_tokens: int = 0

    def __str__(self) -> str:
        if self.dtype != "float32":
            return self.dtype
        return f"float32, fp16 weights <= {self.fp16_weights_max_tokens}" if self.fp16_weights_max_tokens else "float32"


def arithmetic_of(flags: str) -> Arithmetic:
    """As a path's encoder resolves it: auto is fp32 on CPU, bf16/fp16 on CUDA; fp16 weights only for fp32 on a CPU."""
    from mcp_classifier.engine.encoder import pick_device, pick_dtype  # imports torch: paid when a bench runs, not on import

    settings = path_settings(flags)
    device = pick_device(settings.model.device)
    dtype = str(pick_dtype(settings.model.dtype, device)).removeprefix("torch.")
    on_cpu_fp32 = device.type == "cpu" and dtype == "float32"
    return Arithmetic(dtype, settings.engine.fp16_weights_max_tokens if on_cpu_fp32 else 0)


@dataclass
class Reference:
    """The in-process figures paths in one arithmetic are read against: the floor, the raw lone text, the ceilings."""

    arithmetic: Arithmetic
    floor: float
    lone_ms: float
    ceilings: dict[int, float]
    raw: list[RawResult]
    lone_classify_ms: float | None = None  # one text through the whole classify(): scoring included
    # The issue's own floor: padded length-sorted chunks of --batch-size, its fastest pass (the issue took the best of
    # 3). ``floor`` is the higher of the two forward rows' rates over all their passes: where the encoder's packed
    # batching is the faster (14-25% on an AVX-512 Xeon), shares of ``floor`` do not credit the serving layer with
    # it, and shares of this one do; the tables give both.
    issue_floor: float | None = None

    def issue_share(self, rps: float) -> float | None:
        return rps / self.issue_floor if self.issue_floor else None


def reference_settings(arithmetic: Arithmetic, args: argparse.Namespace) -> Settings:
    """The in-process model a reference (and the host checks) run: the bench's model in that arithmetic."""
    return Settings(
        batch_size=args.batch_size,
        model=args.model,
        device=args.device,
        dtype=arithmetic.dtype,
        fp16_weights_max_tokens=arithmetic.fp16_weights_max_tokens,
    )


def measure_reference(arithmetic: Arithmetic, texts: list[str], args: argparse.Namespace) -> Reference:
    settings = reference_settings(arithmetic, args)
    print(f"{args.model} ({arithmetic}) floor over {len(texts)} texts, {os.cpu_count()} CPUs", file=sys.stderr)
    raw = measure_raw(settings, texts, args.raw_seconds)
    floor = max(r.texts_per_s for r in raw[:2])
    lone = measure_lone(settings, texts)
    print(f"  raw lone text: {lone.forward_ms:.1f} ms; through the whole classify(): {lone.classify_ms:.1f} ms", file=sys.stderr)
    ceilings = measure_arrival_order(settings, texts, [arrival_batch(c, args.batch_size) for c in args.clients], args.raw_seconds)
    padded_sorted_chunks = raw[0]  # measure_raw's rows in order: the issue's floor, the encoder's own batching, classify()
    return Reference(arithmetic, floor, lone.forward_ms, ceilings, raw, lone.classify_ms, padded_sorted_chunks.best_pass_texts_per_s)


SETTLE_S = 5.0  # a started server idles this long before it is timed, as a deployment's would before traffic


def add_settle_flag(parser: argparse.ArgumentParser) -> None:
    """--settle: shared by every bench that starts servers (this one and ab_paths)."""
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help=f"idle seconds after a server is ready, before its first level, as a deployment has before traffic: its "
        f"replicas' lone-call probe needs a quiet host [default: {SETTLE_S:g}]",
    )


def run_path(name: str, flags: str, wrk: Wrk, args: argparse.Namespace, env: dict[str, str] | None = None) -> list[HttpResult]:
    """Start one path's `serve` (``env`` added to its environment), run wrk at every client level, stop it."""
    serve_args = ["--no-cache", "--model", args.model, "--batch-size", str(args.batch_size), *shlex.split(flags)]
    print(f"[{name}] {shlex.join([*(f'{k}={v}' for k, v in (env or {}).items()), 'serve', *serve_args])}", file=sys.stderr)
    server = Server(serve_args, env=env)
    results: list[HttpResult] = []
    try:
        url = server.wait_ready()
        time.sleep(args.settle)
        for clients in args.clients:
            wrk.run(url, clients, args.warmup)  # unmeasured: fills caches, grows pools, settles autoscaling
            result = wrk.run(url, clients, args.duration, server.tree)
            print(
                f"  {clients:>3} clients: {result.rps:7.1f} req/s  p50 {result.p50_ms:7.1f} ms  p99 {result.p99_ms:7.1f} ms  "
                f"errors {result.failures}  CPU server {fmt(result.server_cpu_pct, 0)}% wrk {fmt(result.loadgen_cpu_pct, 0)}% "
                f"other {fmt(result.other_cpu_pct, 0)}%",
                file=sys.stderr,
            )
            results.append(result)
    finally:
        server.stop()
    return results


def arrival_batch(clients: int, batch_size: int) -> int:
    """The largest batch a server can form at ``clients`` closed-loop clients."""
    return min(clients, batch_size)


def reference_line(ref: Reference) -> str:
    """The floor and the lone text a run's paths are read against, on one line (every bench's table heads with it)."""
    line = f"{ref.arithmetic}: raw floor {ref.floor:.1f} texts/s (batched, length-sorted)"
    if ref.issue_floor:
        line += f"; the issue's floor {ref.issue_floor:.1f} (padded sorted batches, fastest pass)"
    line += f"; raw lone text {ref.lone_ms:.1f} ms (median)"
    if ref.lone_classify_ms is not None:
        line += f", {ref.lone_classify_ms:.1f} ms through the whole classify() (scoring included)"
    return line


def render(
    references: dict[Arithmetic, Reference],
    batch_size: int,
    runs: dict[str, tuple[str, Arithmetic, list[HttpResult]]],
    host_readings: Sequence[HostReading] = (),
    other_before_floor: float | None = None,
) -> str:
    """Both tables; every path's shares and lone figure are of the reference in its own arithmetic.

    ``host_readings`` (taken in the first arithmetic) close the output with how the host's speed moved; they,
    ``other_before_floor`` and each level's "other" column with what else ran on the host (host_load).
    """

    def share_of_ceiling(ref: Reference, r: HttpResult) -> float | None:
        ceiling = ref.ceilings.get(arrival_batch(r.clients, batch_size))
        return r.rps / ceiling if ceiling else None

    lines = []
    for ref in references.values():
        ceiling_line = ", ".join(f"{size}: {rate:.1f}" for size, rate in sorted(ref.ceilings.items()))
        lines += [
            reference_line(ref),
            f"{ref.arithmetic}: arrival-order ceiling, texts/s by batch size (unsorted, as clients send them): {ceiling_line}",
        ]
    lines += [
        "",
        "| path | arithmetic | clients | req/s | share of its floor | share of the issue's floor | share of arrival-order ceiling "
        "| p50 ms | p99 ms | errors | CPU % server / wrk / other |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, (_, arithmetic, results) in runs.items():
        ref = references[arithmetic]
        for r in results:
            cpu = f"{fmt(r.server_cpu_pct, 0)} / {fmt(r.loadgen_cpu_pct, 0)} / {fmt(r.other_cpu_pct, 0)}"
            lines.append(
                f"| {name} | {arithmetic} | {r.clients} | {r.rps:.1f} | {r.rps / ref.floor:.2f} | {fmt(ref.issue_share(r.rps), 2)} | "
                f"{fmt(share_of_ceiling(ref, r), 2)} | "
                f"{r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.failures} | {cpu} |"
            )
    lines += [
        "",
        "| path | arithmetic | target share at 32 | share at 32 | share at 32 of the issue's floor | ceiling's share of the floor at 32 "
        "| lone p50 ms | added to raw lone | target added | added to the in-process classify() of one text |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (backend, arithmetic, results) in runs.items():
        ref = references[arithmetic]
        ceiling32 = ref.ceilings.get(arrival_batch(32, batch_size))
        by_clients = {r.clients: r for r in results}
        at32 = by_clients.get(32)
        lone = by_clients.get(1)
        lines.append(
            f"| {name} | {arithmetic} | {THROUGHPUT_TARGETS.get(backend, float('nan')):.2f} | {fmt(at32.rps / ref.floor if at32 else None, 2)} | "
            f"{fmt(ref.issue_share(at32.rps) if at32 else None, 2)} | {fmt(ceiling32 / ref.floor if ceiling32 else None, 2)} | "
            f"{fmt(lone.p50_ms if lone else None)} | {fmt(lone.p50_ms - ref.lone_ms if lone else None)} | "
            f"+{LONE_TARGETS_MS.get(backend, float('nan')):g} | "
            f"{fmt(lone.p50_ms - ref.lone_classify_ms if lone and ref.lone_classify_ms is not None else None)} |"
        )
    if host_readings:
        lines += ["", host_speed_line(next(iter(references.values())).lone_ms, host_readings)]
    checks = [("before the floor", other_before_floor), *((r.label, r.other_cpu_pct) for r in host_readings)]
    serving = [(f"{name} at {r.clients} clients", r.other_cpu_pct) for name, (_, _, results) in runs.items() for r in results]
    if other_line := other_load_line(checks, serving):
        lines += ["", other_line]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per level [default: 10]")
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds before each level [default: 3]")
    add_settle_flag(parser)
    parser.add_argument("--clients", type=client_levels, default=[1, 8, 32, 64], help="connection counts [default: 1,8,32,64]")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="builtin:minilm", help="model of the floor and of every path [default: builtin:minilm]")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="device of the in-process floor [default: auto]")
    parser.add_argument("--raw-seconds", type=float, default=5.0, help="seconds per raw floor measurement [default: 5]")
    parser.add_argument("--path", type=path_spec, action="append", help="NAME='serve flags' (repeatable) [default: local and ray]")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE as JSON")
    args = parser.parse_args(argv)
    if not wrk_available():
        print("wrk is not on PATH (apt-get install wrk): it is the load generator of this benchmark", file=sys.stderr)
        return 2
    paths = dict(args.path) if args.path else DEFAULT_PATHS
    texts = list(TEXTS)
    arithmetics = {name: arithmetic_of(flags) for name, flags in paths.items()}
    other_before_floor = other_load_now()
    if note := before_floor_note(other_before_floor):
        print(note, file=sys.stderr)
    references = {arithmetic: measure_reference(arithmetic, texts, args) for arithmetic in dict.fromkeys(arithmetics.values())}
    wrk = Wrk(texts)
    host_check = HostSpeedCheck(reference_settings(next(iter(references)), args), texts)
    runs: dict[str, tuple[str, Arithmetic, list[HttpResult]]] = {}
    try:
        for name, flags in paths.items():
            host_check(f"before {name}")
            runs[name] = (backend_of(flags), arithmetics[name], run_path(name, flags, wrk, args))
        host_check("after the last path")
    finally:
        host_check.close()
    print()
    print(render(references, args.batch_size, runs, host_check.readings, other_before_floor))
    if args.json:
        first = next(iter(references.values()))
        payload = {
            # the first arithmetic's figures at the top level, as before; every arithmetic's under "references"
            "floor_texts_per_s": first.floor,
            "issue_floor_texts_per_s": first.issue_floor,
            "raw_lone_ms": first.lone_ms,
            "arrival_order_texts_per_s": {str(size): rate for size, rate in first.ceilings.items()},
            "raw": [asdict(r) for r in first.raw],
            "references": {
                str(arithmetic): {
                    "floor_texts_per_s": ref.floor,
                    "issue_floor_texts_per_s": ref.issue_floor,
                    "raw_lone_ms": ref.lone_ms,
                    "raw_lone_classify_ms": ref.lone_classify_ms,
                    "arrival_order_texts_per_s": {str(size): rate for size, rate in ref.ceilings.items()},
                    "raw": [asdict(r) for r in ref.raw],
                }
                for arithmetic, ref in references.items()
            },
            "host_checks": [asdict(r) for r in host_check.readings],
            "other_cpu_pct_before_floor": other_before_floor,
            "paths": {
                name: {
                    "flags": paths[name],
                    "backend": backend,
                    "dtype": arithmetic.dtype,
                    "arithmetic": str(arithmetic),
                    "results": [asdict(r) for r in results],
                }
                for name, (backend, arithmetic, results) in runs.items()
            },
        }
        args.json.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    return 0 if all(r.failures == 0 for _, _, results in runs.values() for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
