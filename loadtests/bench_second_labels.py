#!/usr/bin/env python
"""What reading a two-topic query's second label from its parts costs, beside the same classifier without it, in one run.

With out-of-scope detection on, ``second_labels: parts`` embeds the clauses of each multi-clause query once more
(classify/part_labels.py). This times the in-process classifier both ways on the same router traffic
(datasets/accuracy/router-traffic*): batches of 32, and one text a call (a lone request's floor), alternating the
two in each round so that a noisy host weighs on both alike. It prints the rates, the per-text times and their
ratios to ``off``, and the share of the texts that have two or more parts.

Usage (from the repository root):
    python -m loadtests.bench_second_labels [--categories-file datasets/out-of-scope/saas-support/categories.yaml] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
BATCH = 32


def load_texts() -> list[str]:
    return [
        json.loads(line)["text"]
        for path in sorted((DATASETS / "accuracy").glob("router-traffic*/queries.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--categories-file", type=Path, default=DATASETS / "out-of-scope" / "saas-support" / "categories.yaml")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lone", type=int, default=120, help="texts timed one a call in each round")
    args = parser.parse_args()

    from mcp_classifier.classify.build import build_classifier
    from mcp_classifier.classify.query_parts import topic_parts
    from mcp_classifier.settings import Settings

    texts = load_texts()
    modes = ("off", "parts")
    classifiers = {m: build_classifier(Settings(categories_file=args.categories_file, second_labels=m)) for m in modes}
    for classifier in classifiers.values():
        classifier.classify(texts[:BATCH])  # warm: first calls pay for allocation
    batch_s: dict[str, list[float]] = {m: [] for m in modes}
    lone_ms: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            started = time.perf_counter()
            for at in range(0, len(texts), BATCH):
                classifiers[mode].classify(texts[at : at + BATCH])
            batch_s[mode].append(time.perf_counter() - started)
            for text in texts[: args.lone]:
                started = time.perf_counter()
                classifiers[mode].classify([text])
                lone_ms[mode].append((time.perf_counter() - started) * 1000)
    multi = sum(len(topic_parts(t)) >= 2 for t in texts) / len(texts)
    print(f"{len(texts)} router-traffic texts, {multi:.0%} with two or more parts; {args.categories_file}; {args.rounds} rounds\n")
    print("| second_labels | texts/s (batches of 32) | ratio to off | lone p50 ms | lone p95 ms | p50 ratio to off |")
    print("|---|---:|---:|---:|---:|---:|")
    base_rate = len(texts) / statistics.median(batch_s["off"])
    base_p50 = statistics.median(lone_ms["off"])
    for mode in modes:
        rate = len(texts) / statistics.median(batch_s[mode])
        p50 = statistics.median(lone_ms[mode])
        p95 = statistics.quantiles(lone_ms[mode], n=20)[18]
        print(f"| {mode} | {rate:.0f} | {rate / base_rate:.2f} | {p50:.1f} | {p95:.1f} | {p50 / base_p50:.2f} |")


if __name__ == "__main__":
    main()
