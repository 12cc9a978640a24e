"""The raw in-process floor: the model's own rate on the same texts, measured in the same run."""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

from .cpu import host_busy_seconds, self_cpu_seconds
from .tables import fmt


@dataclass
class RawResult:
    """In-process rates over TEXTS: the ceiling any HTTP path can approach."""

    name: str
    texts_per_s: float
    passes: int
    seconds: float
    best_pass_texts_per_s: float = 0.0  # fastest single pass: what a quiet host would give
    own_cpu_pct: float | None = None
    other_cpu_pct: float | None = None


def measure_raw(settings: Settings, texts: Sequence[str], seconds: float) -> list[RawResult]:
    """Time the raw forward two ways, and classify(), in this process; then free the model.

    The two forward rows: the issue's floor (length-sorted fixed chunks of ``batch_size``, one
    padded model call each) and the encoder's own batching of all the texts at once (packed rows,
    or planned sub-batches where packing is off: what the server runs, given every text together).
    The higher of the two is the floor, so the ratio never flatters the server. Runs before the
    server starts so neither side competes for the cores.
    """
    classifier = build_classifier(settings)
    encoder = classifier.encoder
    queries = [encoder.format_query(t) for t in texts]
    by_length = [queries[i] for i in sorted(range(len(queries)), key=encoder.token_counts(queries).__getitem__)]
    chunks = [by_length[i : i + settings.batching.batch_size] for i in range(0, len(by_length), settings.batching.batch_size)]

    def fixed_chunks(_: list[str]) -> None:
        for chunk in chunks:
            encoder.encode_padded(chunk, one_call=True)

    results: list[RawResult] = []
    try:
        for name, fn in (
            (f"raw forward, batch {settings.batching.batch_size} sorted", fixed_chunks),
            ("raw forward, the encoder's own batching", encoder.encode_queries),
            ("raw classify()", classifier.classify),
        ):
            fn(list(texts))  # warm-up: first calls pay allocator and kernel-selection costs
            passes = 0
            self0, host0 = self_cpu_seconds(), host_busy_seconds()
            started = time.perf_counter()
            fastest = float("inf")
            while True:
                t0 = time.perf_counter()
                fn(list(texts))
                passes += 1
                fastest = min(fastest, time.perf_counter() - t0)
                elapsed = time.perf_counter() - started
                if elapsed >= seconds and passes >= 2:
                    break
            self1, host1 = self_cpu_seconds(), host_busy_seconds()
            other = None if host0 is None or host1 is None else max(0.0, 100.0 * ((host1 - host0) - (self1 - self0)) / elapsed)
            rate, best = passes * len(texts) / elapsed, len(texts) / fastest
            results.append(RawResult(name, rate, passes, elapsed, best, 100.0 * (self1 - self0) / elapsed, other))
            print(
                f"  {name}: {rate:.1f} texts/s, best pass {best:.1f} ({passes} passes in {elapsed:.1f} s, "
                f"own CPU {results[-1].own_cpu_pct:.0f}%, other processes {fmt(other, 0)}%)",
                file=sys.stderr,
            )
    finally:
        del classifier
        gc.collect()
    return results


ARRIVAL_SEED = 0  # one fixed arrival order, so runs compare


def measure_arrival_order(settings: Settings, texts: Sequence[str], sizes: Sequence[int], seconds: float) -> dict[int, float]:
    """In-process texts/s when each call holds ``size`` texts in the order they arrived, for each size.

    The floor sorts all the texts by length before cutting batches, which no server can do: at N
    clients its batches hold at most N texts of whatever length arrived together, so it pays padding
    and per-call costs the floor avoids. These rates (a fixed shuffle cut into chunks of ``size``,
    each through the encoder's own batching, as the server runs them) are the most a path
    can reach at that many clients on these texts, HTTP and scheduling costing nothing; a path's
    share of them is what its serving layer itself costs.
    """
    classifier = build_classifier(settings)
    encoder = classifier.encoder
    arrived = list(texts)
    random.Random(ARRIVAL_SEED).shuffle(arrived)
    rates: dict[int, float] = {}
    try:
        for size in sorted(set(sizes)):
            chunks = [arrived[i : i + size] for i in range(0, len(arrived), size)]
            for chunk in chunks:
                encoder.encode_queries(chunk)  # warm-up, as for the floor
            passes, started = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - started) < seconds or passes < 2:
                for chunk in chunks:
                    encoder.encode_queries(chunk)
                passes += 1
            rates[size] = passes * len(arrived) / elapsed
            print(f"  arrival-order batches of {size}: {rates[size]:.1f} texts/s ({passes} passes in {elapsed:.1f} s)", file=sys.stderr)
    finally:
        del classifier, encoder
        gc.collect()
    return rates


@dataclass(frozen=True)
class LoneTimes:
    """Median milliseconds of one text alone, in this process, two ways."""

    forward_ms: float  # tokenise + forward + pool: the raw lone text
    classify_ms: float  # the whole classify() a served request runs: token vectors, scoring, the result


def time_each_alone(call: Callable[[list[str]], object], texts: Sequence[str]) -> list[float]:
    """Seconds of ``call`` on each text alone, back to back: the raw lone text's measure (and the host checks')."""
    times = []
    for text in texts:
        started = time.perf_counter()
        call([text])
        times.append(time.perf_counter() - started)
    return times


def measure_lone(settings: Settings, texts: Sequence[str], rounds: int = 3) -> LoneTimes:
    """One text alone through the encoder, and through the whole classify(), in alternating blocks.

    The first is what a lone request cannot go below; the gap between the two is classification work
    (token matches, scoring) that every served request does, so a path's p50 minus the second is what
    the serving layer itself adds.
    """
    classifier = build_classifier(settings)
    encoder = classifier.encoder
    try:
        for text in texts[:10]:  # warm-up
            encoder.encode_queries([text])
            classifier.classify([text])
        forward: list[float] = []
        classify: list[float] = []
        # Blocks: each kind of call back to back, as a lone client sends them, and the raw lone text
        # measured exactly as before this second figure existed.
        for _ in range(rounds):
            forward += time_each_alone(encoder.encode_queries, texts)
            classify += time_each_alone(classifier.classify, texts)
    finally:
        del classifier, encoder
        gc.collect()
    return LoneTimes(1000 * statistics.median(forward), 1000 * statistics.median(classify))
