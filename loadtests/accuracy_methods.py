#!/usr/bin/env python
"""Scoring methods compared on category sets the project wrote for this (datasets/accuracy), in one run.

For every set and every method in mcp_classifier.classify.scorers it prints, side by side:
  * held-out queries: accuracy, accuracy among the "hard" styles (noisy, multi, terse), ECE;
  * k-fold on the examples (each fold's examples classified by a method fitted on the others):
    accuracy and ECE — what `mcp-classifier doctor` reports to a user before they deploy;
  * beside each ECE, the ECE a perfectly calibrated model would show with the same confidences on as
    many items: on 50-100 queries that alone is 0.08-0.11, so a set's ECE is read against it;
  * pooled over the sets that bring their own categories file (the few-shot ones): accuracy and ECE
    over all their queries at once, where the ECE's noise is small enough to judge a 0.05 target;
  * the time to fit the index (the start-up and reload cost).
Each method runs with and without word matches (BM25) and token matches (late interaction), as asked.
The queries never take part in fitting. The embeddings are computed once per set and shared.

Usage (from the repository root):
    python -m loadtests.accuracy_methods [--sets datasets/accuracy] [--model builtin:minilm] [--folds 4]
        [--methods auto,linear] [--lexical off,auto] [--token-matching off,auto]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import get_args

import numpy as np

from mcp_classifier.classify.categories import load_categories
from mcp_classifier.classify.fusion import LexicalMode, fit_category_scorer
from mcp_classifier.classify.index import category_texts
from mcp_classifier.classify.scorers import SCORING_METHODS, ScoringMethod, stratified_folds
from mcp_classifier.engine.encoder import MiddleLayer
from mcp_classifier.evaluation.doctor import TokenVectors
from mcp_classifier.evaluation.metrics import calibrated_ece, expected_calibration_error
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

HARD_STYLES = {"noisy", "multi", "terse"}
DEFAULT_SET = "router-traffic"  # queries only: scored against the packaged default categories


def load_set(folder: Path) -> tuple[Path | None, list[dict[str, str]]]:
    categories = folder / "categories.yaml"
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    return (categories if categories.exists() else None), queries


def k_fold_predictions(
    method: ScoringMethod,
    lexical: LexicalMode,
    vectors: np.ndarray,
    texts: list[str],
    labels: np.ndarray,
    descriptions: np.ndarray,
    words_of: list[str],
    folds: int,
    tokens: TokenVectors | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every example predicted by the method fitted on the other folds (stratified, fixed shuffle)."""
    probabilities = np.zeros((len(labels), len(words_of)))
    for test in stratified_folds(labels, folds):
        train = np.setdiff1d(np.arange(len(labels)), test)
        bags = tokens.bags(train, labels) if tokens is not None else None
        fitted = fit_category_scorer(
            method, vectors[train], [texts[i] for i in train], labels[train], descriptions, words_of, lexical, bags
        )
        probabilities[test] = fitted.probabilities(
            vectors[test], [texts[i] for i in test], [tokens.examples[i] for i in test] if tokens else None
        )
    return probabilities.argmax(axis=1), probabilities.max(axis=1)


def pooled_rows(rows: list[dict], outcomes: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]) -> list[dict]:
    """Per method, every few-shot set's held-out queries taken as one set: (confidence, correct) concatenated."""
    few_shot = sorted({r["set"] for r in rows if r["few_shot"]})
    pooled = []
    for method in dict.fromkeys(r["method"] for r in rows):
        parts = [outcomes[(name, method)] for name in few_shot if (name, method) in outcomes]
        if not parts:
            continue
        confidence = np.concatenate([c for c, _ in parts])
        correct = np.concatenate([ok for _, ok in parts])
        pooled.append({
            "method": method, "sets": len(parts), "queries": len(confidence), "accuracy": float(correct.mean()),
            "mean_accuracy": float(np.mean([ok.mean() for _, ok in parts])), "mean_confidence": float(confidence.mean()),
            "ece": expected_calibration_error(confidence, correct)[0], "ece_if_calibrated": calibrated_ece(confidence),
        })  # fmt: skip
    return pooled


def variant_name(method: str, lexical: str, token_matching: str = "off") -> str:
    return method + "+words" * (lexical != "off") + "+tokens" * (token_matching != "off")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", type=Path, default=Path("datasets/accuracy"))
    parser.add_argument("--model", default="builtin:minilm")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--methods", default=",".join(SCORING_METHODS))
    parser.add_argument("--lexical", default="off,auto", help="lexical_scoring values to run each method with [default: %(default)s]")
    parser.add_argument("--token-matching", default="off,auto", help="token_matching values to run each method with [default: %(default)s]")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--middle-layer-features",
        choices=get_args(MiddleLayer),
        default="off",
        help="classify on a middle layer beside the last [default: %(default)s]",
    )
    args = parser.parse_args(argv)
    variants = [(m, lx, tm) for tm in args.token_matching.split(",") for lx in args.lexical.split(",") for m in args.methods.split(",")]
    classifier = build_classifier(Settings(model=args.model, middle_layer_features=args.middle_layer_features))
    encoder = classifier.encoder
    rows = []
    outcomes: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for folder in sorted(p for p in args.sets.iterdir() if (p / "queries.jsonl").exists()):
        categories_file, queries = load_set(folder)
        config = load_categories(categories_file)
        names = config.names
        examples = [(e, i) for i, c in enumerate(config.categories) for e in c.examples]
        texts = [e for e, _ in examples]
        words_of = category_texts(config)
        vectors = encoder.encode_documents(texts)
        labels = np.array([i for _, i in examples])
        descriptions = encoder.encode_documents([c.description or c.name for c in config.categories])
        query_vectors = encoder.encode_queries([q["text"] for q in queries])
        set_tokens = TokenVectors(
            encoder.encode_with_tokens(texts, query=False)[1],
            encoder.encode_with_tokens(words_of, query=False)[1],
            encoder.encode_with_tokens([q["text"] for q in queries], query=True)[1],
        )
        truth = np.array([names.index(q["category"]) for q in queries])
        styles = [q.get("style", "") for q in queries]
        hard = np.array([s in HARD_STYLES for s in styles])
        print(f"{folder.name}: {len(names)} categories, {len(examples)} examples, {len(queries)} queries", file=sys.stderr)
        for method, lexical, token_matching in variants:
            tokens = set_tokens if token_matching != "off" else None
            started = time.perf_counter()
            bags = tokens.bags(np.arange(len(labels)), labels) if tokens is not None else None
            fitted = fit_category_scorer(method, vectors, texts, labels, descriptions, words_of, lexical, bags)  # type: ignore[arg-type]
            fit_ms = (time.perf_counter() - started) * 1000
            probabilities = fitted.probabilities(query_vectors, [q["text"] for q in queries], set_tokens.queries)
            predicted, confidence = probabilities.argmax(axis=1), probabilities.max(axis=1)
            correct = predicted == truth
            ece, _ = expected_calibration_error(confidence, correct)
            fold_pred, fold_conf = k_fold_predictions(
                method,
                lexical,
                vectors,
                texts,
                labels,
                descriptions,
                words_of,
                args.folds,
                tokens,  # type: ignore[arg-type]
            )
            fold_ece, _ = expected_calibration_error(fold_conf, fold_pred == labels)
            per_style: dict[str, list[bool]] = defaultdict(list)
            for style, ok in zip(styles, correct):
                per_style[style].append(bool(ok))
            outcomes[(folder.name, variant_name(method, lexical, token_matching))] = (confidence, correct)
            rows.append({
                "set": folder.name, "method": variant_name(method, lexical, token_matching), "picked": fitted.method, "queries": len(queries),
                "few_shot": categories_file is not None, "accuracy": float(correct.mean()),
                "hard_accuracy": float(correct[hard].mean()) if hard.any() else None, "ece": ece, "ece_if_calibrated": calibrated_ece(confidence),
                "kfold_accuracy": float((fold_pred == labels).mean()), "kfold_ece": fold_ece, "kfold_ece_if_calibrated": calibrated_ece(fold_conf),
                "fit_ms": fit_ms,
                "per_style": {s: float(np.mean(v)) for s, v in sorted(per_style.items())},
            })  # fmt: skip
            print(
                f"  {rows[-1]['method']} ({fitted.method}): {rows[-1]['accuracy']:.3f} (k-fold {rows[-1]['kfold_accuracy']:.3f})",
                file=sys.stderr,
            )
    print(
        "| set | method | picked | held-out accuracy | hard styles | ECE (if calibrated) | k-fold accuracy "
        "| k-fold ECE (if calibrated) | fit ms |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        hard_text = "—" if r["hard_accuracy"] is None else f"{r['hard_accuracy']:.3f}"
        print(
            f"| {r['set']} | {r['method']} | {r['picked']} | {r['accuracy']:.3f} | {hard_text} | {r['ece']:.3f} ({r['ece_if_calibrated']:.3f}) "
            f"| {r['kfold_accuracy']:.3f} | {r['kfold_ece']:.3f} ({r['kfold_ece_if_calibrated']:.3f}) | {r['fit_ms']:.0f} |"
        )
    pooled = pooled_rows(rows, outcomes)
    if pooled:
        print("\npooled over the few-shot sets (every held-out query of the sets with their own categories file):")
        print("| method | sets | queries | accuracy (pooled) | mean of the sets' accuracies | mean confidence | ECE | ECE if calibrated |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for p in pooled:
            print(
                f"| {p['method']} | {p['sets']} | {p['queries']} | {p['accuracy']:.3f} | {p['mean_accuracy']:.3f} | {p['mean_confidence']:.3f} "
                f"| {p['ece']:.3f} | {p['ece_if_calibrated']:.3f} |"
            )
    print("\nper style (held-out accuracy):")
    for r in rows:
        print(f"  {r['set']:16s} {r['method']:10s} " + "  ".join(f"{s or '-'} {v:.2f}" for s, v in r["per_style"].items()))
    if args.json:
        args.json.write_text(json.dumps({"sets": rows, "pooled_few_shot": pooled}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
