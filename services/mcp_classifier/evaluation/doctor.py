"""`mcp-classifier doctor`: what a categories file will do, told before it is deployed.

Everything comes from the user's own examples, each classified by the configured scoring method
fitted on the other folds (stratified k-fold), so the figures are what unseen queries like the
examples would get:
- confusable pairs: cosine similarity of the category centroids, and how often one category's
  examples were classified as the other;
- examples that vote for another category (out of fold, with the confidence);
- where more examples would help most: the categories with the lowest out-of-fold recall, and
  the neighbour that takes their examples;
- expected accuracy and ECE;
- the categories with too few examples to fit their own out-of-scope threshold, and how many to add;
- candidate out-of-scope examples per category (near_misses.py): background queries and queries built from the
  file's own words that sit nearest to it, with the in-scope probability the classifier gives each.
With labelled queries it also classifies them with the scorer fitted on every example, and reports what the
served classifier does with them as eval does: a query labelled null is out of scope, and the figures say how
many of those were answered out of scope and how many of the others in scope with the right category.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..classify.categories import CategoryConfig
from ..classify.fusion import LexicalMode, fit_category_scorer
from ..classify.index import category_texts
from ..classify.scope import IN_SCOPE_PROBABILITY, SMALL_CATEGORY_EXAMPLES
from ..classify.scorers import ScoringMethod, centroids, stratified_folds
from ..classify.token_match import CategoryTokens, TokenSet
from .dataset import OUT_OF_SCOPE
from .metrics import Prediction, calibrated_ece, expected_calibration_error, scope_metrics
from .near_misses import Candidate

MIN_FOLDS, MAX_FOLDS = 2, 5


@dataclass(frozen=True)
class TokenVectors:
    """Token matching's inputs (TextEncoder.encode_with_tokens): each example's tokens, each category's name and
    description's, and each labelled query's (empty without queries)."""

    examples: Sequence[TokenSet]
    categories: Sequence[TokenSet]
    queries: Sequence[TokenSet] = field(default_factory=list)

    def bags(self, keep: np.ndarray, labels: np.ndarray) -> CategoryTokens:
        return CategoryTokens(self.categories, [self.examples[i] for i in keep], labels[keep])


CONFUSABLE_SIMILARITY = 0.75  # centroid cosine above which two categories are flagged even without confusions
PAIRS_LISTED = 8
MISVOTES_LISTED = 25


@dataclass
class Pair:
    first: str
    second: str
    centroid_similarity: float
    confusions: int  # examples of either classified as the other, out of fold


@dataclass
class Misvote:
    example: str
    category: str
    predicted: str
    confidence: float


@dataclass
class CategoryHealth:
    name: str
    examples: int
    recall: float  # out-of-fold share of its examples classified as itself
    taken_by: str | None  # the category most of its misclassified examples went to


@dataclass
class Diagnosis:
    method: str
    folds: int
    categories: int
    examples: int
    expected_accuracy: float
    expected_ece: float
    expected_ece_if_calibrated: float  # the ECE a perfectly calibrated model would show on this many examples
    pairs: list[Pair]
    misvotes: list[Misvote]
    health: list[CategoryHealth]  # weakest first
    chosen_method: str = ""  # what `method` (e.g. auto) picks on all the examples
    queries: dict[str, Any] = field(default_factory=dict)  # accuracy, ece, n, errors on the user's labelled queries
    scope: dict[str, Any] | None = None  # ScopeStats.to_public of the file: thresholds, coverage, loose ones
    # eval's out-of-scope figures on the user's labelled queries (null labels are out of scope), as served
    query_scope: dict[str, Any] | None = None
    # where some of those queries name a second topic (`also`): eval's labels figures (metrics.second_label_metrics)
    query_labels: dict[str, float] | None = None
    # in file order, the categories with fewer than SMALL_CATEGORY_EXAMPLES examples: name, examples, add (how many more)
    small: list[dict[str, Any]] = field(default_factory=list)
    # per category, texts near it that are likely out of scope, riskiest first (near_misses.propose): to copy into
    # out_of_scope_examples the ones that really are not the file's
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def flagged_pairs(self) -> list[Pair]:
        return [p for p in self.pairs if p.confusions or p.centroid_similarity >= CONFUSABLE_SIMILARITY]


def diagnose(
    config: CategoryConfig,
    example_vectors: np.ndarray,
    description_vectors: np.ndarray,
    method: ScoringMethod,
    query_vectors: np.ndarray | None = None,
    query_labels: list[str] | None = None,
    query_texts: list[str] | None = None,
    lexical: LexicalMode = "auto",
    tokens: TokenVectors | None = None,
) -> Diagnosis:
    """Vectors are unit-length embeddings of every example (in file order) and of each description.

    tokens: the token vectors token matching scores (it is on), or None (off).
    """
    names = config.names
    examples = [(text, i) for i, category in enumerate(config.categories) for text in category.examples]
    labels = np.array([i for _, i in examples], dtype=np.int64)
    texts = [text for text, _ in examples]
    words_of = category_texts(config)
    n = len(names)
    counts = np.bincount(labels, minlength=n)
    folds = int(np.clip(counts[counts > 0].min() if (counts > 0).any() else MIN_FOLDS, MIN_FOLDS, MAX_FOLDS))
    probabilities = np.zeros((len(labels), n))
    for test in stratified_folds(labels, folds):
        if len(test):
            train = np.setdiff1d(np.arange(len(labels)), test)
            bags = tokens.bags(train, labels) if tokens is not None else None
            fitted = fit_category_scorer(
                method, example_vectors[train], [texts[i] for i in train], labels[train], description_vectors, words_of, lexical, bags
            )
            test_tokens = [tokens.examples[i] for i in test] if tokens is not None else None
            probabilities[test] = fitted.probabilities(example_vectors[test], [texts[i] for i in test], test_tokens)
    predicted, confidence = probabilities.argmax(axis=1), probabilities.max(axis=1)
    correct = predicted == labels
    ece, _ = expected_calibration_error(confidence, correct)

    similarity = centroid_similarity(config, example_vectors, description_vectors)
    confusion = np.zeros((n, n), dtype=np.int64)
    for t, p in zip(labels, predicted):
        confusion[t, p] += 1
    pairs = [
        Pair(names[a], names[b], float(similarity[a, b]), int(confusion[a, b] + confusion[b, a])) for a in range(n) for b in range(a + 1, n)
    ]
    pairs.sort(key=lambda p: (p.confusions, p.centroid_similarity), reverse=True)
    misvotes = [
        Misvote(text, names[labels[i]], names[predicted[i]], float(confidence[i])) for i, (text, _) in enumerate(examples) if not correct[i]
    ]
    misvotes.sort(key=lambda m: m.confidence, reverse=True)
    health = []
    for c in range(n):
        row = confusion[c].copy()
        row[c] = 0
        health.append(
            CategoryHealth(
                names[c],
                int(counts[c]),
                float(confusion[c, c] / counts[c]) if counts[c] else 0.0,
                names[int(row.argmax())] if row.any() else None,
            )
        )
    health.sort(key=lambda h: (h.recall, h.examples))
    bags = tokens.bags(np.arange(len(labels)), labels) if tokens is not None else None
    fitted = fit_category_scorer(method, example_vectors, texts, labels, description_vectors, words_of, lexical, bags)
    diagnosis = Diagnosis(
        method,
        folds,
        n,
        len(labels),
        float(correct.mean()),
        ece,
        calibrated_ece(confidence),
        pairs[:PAIRS_LISTED],
        misvotes,
        health,
        fitted.method,
        small=[
            {"name": names[c], "examples": int(counts[c]), "add": int(SMALL_CATEGORY_EXAMPLES - counts[c])}
            for c in range(n)
            if counts[c] < SMALL_CATEGORY_EXAMPLES
        ],
    )
    if query_vectors is not None and query_labels is not None and query_texts is not None:
        query_probabilities = fitted.probabilities(query_vectors, query_texts, tokens.queries if tokens is not None else None)
        truth = np.array([names.index(label) for label in query_labels])
        query_correct = query_probabilities.argmax(axis=1) == truth
        query_confidence = query_probabilities.max(axis=1)
        query_ece, _ = expected_calibration_error(query_confidence, query_correct)
        diagnosis.queries = {
            "n": len(truth),
            "accuracy": float(query_correct.mean()),
            "ece": query_ece,
            "ece_if_calibrated": calibrated_ece(query_confidence),
            "errors": [
                {"text": text, "expected": query_labels[i], "predicted": names[int(query_probabilities[i].argmax())]}
                for i, text in enumerate(query_texts)
                if not query_correct[i]
            ][:MISVOTES_LISTED],
        }
    return diagnosis


def query_scope(truth: Sequence[str], texts: Sequence[str], predictions: Sequence[Prediction]) -> dict[str, Any]:
    """eval's out-of-scope figures (metrics.scope_metrics) on the user's labelled queries, from the served classifier's
    answers (OUT_OF_SCOPE where it said in_scope false), with the queries each side got wrong."""
    figures: dict[str, Any] = {
        k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in scope_metrics(list(truth), list(predictions)).items()
    }
    figures["wrong_side"] = [
        {"text": text, "expected": label, "answered": p.category}
        for text, label, p in zip(texts, truth, predictions)
        if (label == OUT_OF_SCOPE) != (p.category == OUT_OF_SCOPE)
    ][:MISVOTES_LISTED]
    return figures


# ---- presentation ------------------------------------------------------------------------------
def render(d: Diagnosis) -> str:
    """The terminal (and Markdown) report."""
    lines = [
        f"Expected accuracy {d.expected_accuracy:.1%} and ECE {d.expected_ece:.3f} "
        f"(a perfectly calibrated model would show about {d.expected_ece_if_calibrated:.3f} on this many) on queries like your examples "
        f"({d.folds}-fold cross-validation over {d.examples} examples in {d.categories} categories, scoring method {d.method}"
        + (f", which picks {d.chosen_method} on all of them" if d.chosen_method and d.chosen_method != d.method else "")
        + ").",
    ]
    lines += _render_queries(d) + _render_small(d)
    lines += [
        "",
        "## Confusable categories",
        "",
        "| categories | centroid similarity | examples confused | verdict |",
        "|---|---:|---:|---|",
    ]
    for p in d.pairs:
        verdict = "confusable" if p in d.flagged_pairs else ""
        lines.append(f"| {p.first} / {p.second} | {p.centroid_similarity:.2f} | {p.confusions} | {verdict} |")
    lines += [
        "",
        "## Where more examples would help most",
        "",
        "| category | examples | out-of-fold recall | its misses go to |",
        "|---|---:|---:|---|",
    ]
    for h in d.health:
        lines.append(f"| {h.name} | {h.examples} | {h.recall:.0%} | {h.taken_by or '—'} |")
    weak = [h for h in d.health if h.recall < 1.0]
    if weak:
        first = weak[0]
        advice = f"Start with **{first.name}**: add examples that say how it differs"
        lines += ["", advice + (f" from **{first.taken_by}**." if first.taken_by else ".")]
    lines += _render_scope(d)
    lines += _render_candidates(d)
    lines += ["", f"## Examples that vote for another category ({len(d.misvotes)})", ""]
    if d.misvotes:
        lines += ["| example | its category | classified as | confidence |", "|---|---|---|---:|"]
        lines += [
            f"| {m.example.replace('|', '/')} | {m.category} | {m.predicted} | {m.confidence:.2f} |" for m in d.misvotes[:MISVOTES_LISTED]
        ]
    else:
        lines.append("None: every example is classified as its own category by a scorer that had not seen it.")
    if d.queries.get("errors"):
        lines += ["", "## Your queries that were misclassified", "", "| query | expected | predicted |", "|---|---|---|"]
        lines += [f"| {e['text'].replace('|', '/')} | {e['expected']} | {e['predicted']} |" for e in d.queries["errors"]]
    if d.query_scope and d.query_scope["wrong_side"]:
        lines += ["", "## Your queries answered on the wrong side of in_scope", "", "| query | labelled | answered |", "|---|---|---|"]
        lines += [f"| {e['text'].replace('|', '/')} | {e['expected']} | {e['answered']} |" for e in d.query_scope["wrong_side"]]
    return "\n".join(lines)


def _render_queries(d: Diagnosis) -> list[str]:
    """The lines on the user's labelled queries: the scorer's accuracy on those with a category, then what the served
    classifier does with all of them, in scope or not (null-labelled ones are out of scope)."""
    lines = []
    q = d.query_scope
    nulls = int(q["out_of_scope_n"]) if q else 0
    if d.queries:
        more = f" ({nulls} more are labelled null, out of scope: below)" if nulls else ""
        lines.append(
            f"On your {d.queries['n']} labelled queries{more}: accuracy {d.queries['accuracy']:.1%}, ECE {d.queries['ece']:.3f} "
            f"(about {d.queries['ece_if_calibrated']:.3f} if perfectly calibrated)."
        )
    if q and (nulls or d.scope):
        parts = [f"{q['out_of_scope_recall']:.1%} of the {nulls} labelled null answered out of scope" if nulls else "none labelled null"]
        if q["in_scope_n"]:
            parts.append(
                f"of the {q['in_scope_n']} with a category, {q['in_scope_accuracy']:.1%} answered in scope with the right one "
                f"(coverage {q['coverage']:.1%})"
            )
        off = " This file turns out-of-scope detection off: only a query in a language the model does not read is answered out of scope."
        lines.append(f"As served, in_scope included: {'; '.join(parts)}." + ("" if d.scope else off))
    if d.query_labels:
        s = d.query_labels
        lines.append(
            f"Labels: of the {s['two_topic_n']:g} queries with a second topic (`also`), {s['both']:.1%} answered with both; "
            f"of the {s['one_topic_n']:g} with one, {s['false_second']:.1%} given a second label."
        )
    return lines


def _render_small(d: Diagnosis) -> list[str]:
    """The categories with too few examples: their out-of-scope threshold borrows from the others."""
    if not d.small:
        return []
    why = (
        "own similarities are too few points to fit its out-of-scope threshold, so it borrows the spread of the file's "
        "larger categories (or, where every category is small, of the off-topic set), as if the missing examples were typical"
        if d.scope
        else "figures rest on too few points"
    )
    lines = ["", "## Categories with too few examples", ""]
    lines.append(f"Under {SMALL_CATEGORY_EXAMPLES} examples, a category's {why}. Add examples that say what its queries look like:")
    lines += ["", "| category | examples | add at least |", "|---|---:|---:|"]
    lines += [f"| {s['name']} | {s['examples']} | {s['add']} |" for s in d.small]
    return lines


def _render_scope(d: Diagnosis) -> list[str]:
    """The out-of-scope fit as served: thresholds, the share and typical in-scope probability of the file's own examples."""
    if not d.scope:
        return []
    typical = d.scope.get("typical_in_scope_probability")
    lines = [
        "",
        "## Out-of-scope thresholds",
        "",
        f"Expected out-of-scope recall {d.scope['expected_out_of_scope_recall']:.0%} on {d.scope['negatives']} off-topic texts; "
        f"expected coverage of your own examples {d.scope['expected_coverage']:.0%}"
        + (f"; their typical in-scope probability {typical:.2f}." if typical is not None else "."),
    ]
    if d.scope.get("broad_file"):
        lines += [
            "",
            f"The fit takes {d.scope['background_in_scope']:.0%} of the packaged off-topic set in scope itself: this is a broad file, "
            "whose territory covers general text, so that set cannot speak for its off-topic traffic. An in-scope answer's "
            "probability is read against your examples' typical one (a query like them keeps its whole confidence); which "
            "queries are answered out of scope is unchanged.",
        ]
    elif typical is not None:
        lines += [
            "",
            f"Every answer's confidence is the category's probability times the in-scope probability: a query like your own "
            f"examples keeps about {typical:.2f} of its category's probability, so at a router threshold of 0.5 a category "
            f"probability under {min(0.5 / typical, 1.0):.2f} falls back. That is the price of catching off-topic traffic; "
            "if none of your traffic is off-topic, `detect_out_of_scope: false` keeps every confidence whole.",
        ]
    lines += [
        "",
        "| category | threshold (similarity) | own examples kept in scope | typical in-scope probability | from the file | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    small = {s["name"]: s for s in d.small}
    for name, c in d.scope["categories"].items():
        verdict = "loose: off-topic text near it passes; add out_of_scope_examples or raise its threshold" if c["loose"] else ""
        if name in small and not c["from_file"]:
            verdict = "; ".join(filter(None, [f"too few examples, partly borrowed (above): add {small[name]['add']}", verdict]))
        category_typical = c.get("typical_in_scope_probability")
        lines.append(
            f"| {name} | {c['threshold']:.3f} | {c['expected_coverage']:.0%} | "
            f"{'' if category_typical is None else f'{category_typical:.2f}'} | {'yes' if c['from_file'] else ''} | {verdict} |"
        )
    return lines


def _render_candidates(d: Diagnosis) -> list[str]:
    """Texts near each category that are likely off-topic: the ones the classifier takes in scope are near misses the
    fit misses; the user copies those that really are not theirs into out_of_scope_examples."""
    if not d.candidates:
        return []
    passing = sum(c.in_scope_probability >= IN_SCOPE_PROBABILITY for c in d.candidates)
    lines = [
        "",
        "## Candidate out-of-scope examples",
        "",
        "Off-topic texts nearest to each category: generic ones from the packaged background set, and ones built from "
        "the category's own words in frames about something else. The in-scope probability is the classifier's as "
        f"served; {passing} of {len(d.candidates)} would be taken in scope (at or above {IN_SCOPE_PROBABILITY:g}). Copy "
        "the ones that are really not yours, or your own like them, under `out_of_scope_examples:`. A text that is "
        "yours after all (a broad file may own a background question about its subject) is better added as an example.",
        "",
        "| category | candidate | source | in-scope probability |",
        "|---|---|---|---:|",
    ]
    lines += [
        f"| {c.category} | {c.text.replace('|', '/')} | {c.source} | {c.in_scope_probability:.2f}"
        + (" (in scope)" if c.in_scope_probability >= IN_SCOPE_PROBABILITY else "")
        + " |"
        for c in d.candidates
    ]
    return lines


def write_report(d: Diagnosis, out_dir: Path, config: CategoryConfig, centroid_similarity: np.ndarray | None, source: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [f"# Categories doctor: {source}", "", render(d), ""]
    if centroid_similarity is not None and _heatmap(centroid_similarity, config.names, out_dir / "similarity.png"):
        parts += ["![centroid similarity](similarity.png)", ""]
    path = out_dir / "doctor.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    (out_dir / "doctor.json").write_text(json.dumps(asdict(d), indent=2), encoding="utf-8")
    return path


def centroid_similarity(config: CategoryConfig, example_vectors: np.ndarray, description_vectors: np.ndarray) -> np.ndarray:
    """Cosine of the category centroids, the prototype scorer's own (examples in file order)."""
    labels = np.array([i for i, category in enumerate(config.categories) for _ in category.examples], dtype=np.int64)
    unit = centroids(example_vectors, labels, description_vectors)
    return unit @ unit.T


def _heatmap(matrix: np.ndarray, names: list[str], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    size = max(5.0, 0.45 * len(names) + 2)
    fig, ax = plt.subplots(figsize=(size, size * 0.85))
    image = ax.imshow(matrix, cmap="viridis", vmin=float(matrix.min()), vmax=1.0)
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_title("Cosine similarity of the category centroids")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
