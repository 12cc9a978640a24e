"""Accuracy, macro-F1, per-category precision/recall, confusion matrix, ECE and confidence histogram."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dataset import OUT_OF_SCOPE

ECE_BINS = 10  # equal-width confidence bins, the usual choice for expected calibration error
ECE_FLOOR_DRAWS = 200  # simulated outcome sets behind calibrated_ece: its own noise is then under 0.005
ECE_FLOOR_SEED = 0  # fixed, so a report is reproducible


@dataclass(frozen=True)
class Prediction:
    category: str
    confidence: float
    use_reasoning: bool | None = None
    labels: tuple[str, ...] = ()  # every category answered, main first (empty out of scope)


@dataclass
class Evaluation:
    system: str
    labels: list[str]
    n: int
    accuracy: float
    macro_f1: float
    precision: dict[str, float]
    recall: dict[str, float]
    f1: dict[str, float]
    confusion: list[list[int]]  # rows: true label, columns: predicted label (order of `labels`)
    ece: float
    # The ECE a perfectly calibrated model would show with these confidences on this many items:
    # what `ece` is to be read against, since ten-bin ECE is biased upward on small sets.
    ece_if_calibrated: float
    reliability: list[dict[str, float]]  # per bin: lo, hi, count, accuracy, confidence
    confidence_histogram: list[int]
    reasoning_accuracy: float | None
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Accuracy per tag (style) when the data set has one: {tag: {"n": ..., "accuracy": ...}}
    per_tag: dict[str, dict[str, float]] = field(default_factory=dict)
    # At the router's confidence threshold: the share answered (confidence >= threshold) and their accuracy
    threshold: float | None = None
    answered_share: float | None = None
    answered_accuracy: float | None = None
    # Where the data or the answers hold out-of-scope queries: coverage, out-of-scope recall and precision, AUROC
    scope: dict[str, float] | None = None
    # Where the data holds two-topic queries (`also`): how often labels names every topic, and how often a one-topic
    # query gets a second label
    second_labels: dict[str, float] | None = None
    # Every query's answer, in data order: lets a reader (or a test) recompute any figure from the
    # very predictions the report was made from, and compare systems item by item.
    predictions: list[dict[str, Any]] = field(default_factory=list)


def expected_calibration_error(confidences: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> tuple[float, list[dict[str, float]]]:
    """ECE = sum over bins of (bin share) x |accuracy - mean confidence|; bins are (lo, hi], the first [0, hi]."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = len(confidences)
    ece = 0.0
    table = []
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        mask = (confidences > lo) & (confidences <= hi) if i else (confidences >= lo) & (confidences <= hi)
        count = int(mask.sum())
        acc = float(correct[mask].mean()) if count else 0.0
        conf = float(confidences[mask].mean()) if count else 0.0
        if count:
            ece += count / total * abs(acc - conf)
        table.append({"lo": float(lo), "hi": float(hi), "count": count, "accuracy": acc, "confidence": conf})
    return float(ece), table


def calibrated_ece(confidences: np.ndarray, bins: int = ECE_BINS, draws: int = ECE_FLOOR_DRAWS, seed: int = ECE_FLOOR_SEED) -> float:
    """Mean ECE over outcome sets drawn as if each confidence were exactly right (Bernoulli(confidence)).

    On 50-100 queries a perfectly calibrated model shows an ECE of 0.08-0.11 by sampling noise alone,
    so a measured ECE means something only beside this figure. Written here, not taken from a
    calibration library: it is a few lines of numpy on the project's own ECE, and the libraries
    that offer it (netcal, uncertainty-toolbox) pull in far more than they would give.
    """
    confidences = np.asarray(confidences, dtype=float)
    if not len(confidences):
        return 0.0
    rng = np.random.default_rng(seed)
    outcomes = rng.random((draws, len(confidences))) < confidences
    return float(np.mean([expected_calibration_error(confidences, drawn, bins)[0] for drawn in outcomes]))


def evaluate(
    system: str,
    truth: list[str],
    predictions: list[Prediction],
    expected_reasoning: list[bool | None],
    texts: list[str],
    tags: list[str | None] | None = None,
    threshold: float | None = None,
    topics: list[tuple[str, ...]] | None = None,
) -> Evaluation:
    """``topics``: per query, every category it is about, main first (empty out of scope); with two-topic queries
    among them, the answers' labels are scored too (second_label_metrics)."""
    labels = sorted(set(truth) | {p.category for p in predictions}, key=lambda x: (x not in truth, x))
    index = {label: i for i, label in enumerate(labels)}
    confusion = np.zeros((len(labels), len(labels)), dtype=int)
    for t, p in zip(truth, predictions):
        confusion[index[t], index[p.category]] += 1
    precision, recall, f1 = {}, {}, {}
    for label, i in index.items():
        tp = confusion[i, i]
        predicted, actual = confusion[:, i].sum(), confusion[i, :].sum()
        precision[label] = float(tp / predicted) if predicted else 0.0
        recall[label] = float(tp / actual) if actual else 0.0
        denominator = precision[label] + recall[label]
        f1[label] = 2 * precision[label] * recall[label] / denominator if denominator else 0.0
    seen = set(truth)
    true_labels = [label for label in labels if label in seen]
    correct = np.array([t == p.category for t, p in zip(truth, predictions)])
    confidences = np.array([p.confidence for p in predictions], dtype=float)
    # Confidence is the probability that the answer is right, and no category is right for an out-of-scope query.
    answer_right = correct & np.array([t != OUT_OF_SCOPE for t in truth])
    ece, reliability = expected_calibration_error(confidences, answer_right)
    histogram = [int(b["count"]) for b in reliability]
    stated = [(e, p.use_reasoning) for e, p in zip(expected_reasoning, predictions) if e is not None]
    reasoning = float(np.mean([e == got for e, got in stated])) if stated else None
    errors = [
        {"text": text, "expected": t, "predicted": p.category, "confidence": p.confidence}
        for text, t, p in zip(texts, truth, predictions)
        if t != p.category
    ]
    per_tag: dict[str, dict[str, float]] = {}
    for tag in sorted({t for t in tags or [] if t}):
        members = np.array([t == tag for t in tags or []])
        per_tag[tag] = {"n": int(members.sum()), "accuracy": float(correct[members].mean())}
    answered = confidences >= threshold if threshold is not None else None
    return Evaluation(
        system=system,
        labels=labels,
        n=len(truth),
        accuracy=float(correct.mean()),
        macro_f1=float(np.mean([f1[label] for label in true_labels])),
        precision=precision,
        recall=recall,
        f1=f1,
        confusion=confusion.tolist(),
        ece=ece,
        ece_if_calibrated=calibrated_ece(confidences),
        reliability=reliability,
        confidence_histogram=histogram,
        reasoning_accuracy=reasoning,
        errors=errors,
        per_tag=per_tag,
        threshold=threshold,
        answered_share=None if answered is None else float(answered.mean()),
        answered_accuracy=None if answered is None or not answered.any() else float(correct[answered].mean()),
        scope=scope_metrics(truth, predictions) if OUT_OF_SCOPE in labels else None,
        second_labels=second_label_metrics(topics, predictions) if topics else None,
        predictions=[
            {
                "text": text,
                "expected": t,
                "predicted": p.category,
                "confidence": p.confidence,
                "use_reasoning": p.use_reasoning,
                "labels": list(p.labels),
            }
            for text, t, p in zip(texts, truth, predictions)
        ],
    )


def second_label_metrics(topics: list[tuple[str, ...]], predictions: list[Prediction]) -> dict[str, float] | None:
    """On in-scope queries: the share of two-topic ones whose labels name all their topics (``both``), and the share of
    one-topic ones answered with more than one label (``false_second``); None where no query has two topics."""
    two = [(set(t), p) for t, p in zip(topics, predictions) if len(t) > 1]
    if not two:
        return None
    one = [p for t, p in zip(topics, predictions) if len(t) == 1]
    return {
        "two_topic_n": len(two),
        "both": float(np.mean([wanted <= set(p.labels) for wanted, p in two])),
        "one_topic_n": len(one),
        "false_second": float(np.mean([len(p.labels) > 1 for p in one])) if one else 0.0,
    }


def scope_metrics(truth: list[str], predictions: list[Prediction]) -> dict[str, float]:
    """How well answers tell in-scope from out-of-scope queries.

    in_scope_accuracy: in-scope queries answered in scope with the right category; coverage: in-scope queries
    answered in scope; out_of_scope_recall and _precision: of the out-of-scope queries, and of the answers that
    said out of scope; auroc: how well confidence ranks in-scope queries above out-of-scope ones.
    """
    is_out = np.array([t == OUT_OF_SCOPE for t in truth])
    said_out = np.array([p.category == OUT_OF_SCOPE for p in predictions])
    right = np.array([t == p.category for t, p in zip(truth, predictions)])
    confidences = np.array([p.confidence for p in predictions], dtype=float)
    inside = ~is_out
    return {
        "in_scope_n": int(inside.sum()),
        "out_of_scope_n": int(is_out.sum()),
        "in_scope_accuracy": float(right[inside].mean()) if inside.any() else 0.0,
        "coverage": float((~said_out[inside]).mean()) if inside.any() else 0.0,
        "out_of_scope_recall": float(said_out[is_out].mean()) if is_out.any() else 0.0,
        "out_of_scope_precision": float(is_out[said_out].mean()) if said_out.any() else 0.0,
        "auroc": auroc(confidences[inside], confidences[is_out]),
    }


def auroc(positives: np.ndarray, negatives: np.ndarray) -> float:
    """P(a random positive scores above a random negative), ties counting half; nan without both kinds."""
    if not len(positives) or not len(negatives):
        return float("nan")
    from sklearn.metrics import roc_auc_score

    labels = np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))])
    return float(roc_auc_score(labels, np.concatenate([positives, negatives])))


def coverage_accuracy_curve(truth: list[str], predictions: list[Prediction]) -> list[tuple[float, float]]:
    """(coverage, accuracy) as the confidence threshold rises: answering only the most confident share of all
    queries, how many of those answers are right (an out-of-scope query answered with a category is wrong)."""
    confidences = np.array([p.confidence for p in predictions], dtype=float)
    right = np.array([t == p.category and t != OUT_OF_SCOPE for t, p in zip(truth, predictions)])
    order = np.argsort(-confidences, kind="stable")
    hits = np.cumsum(right[order])
    answered = np.arange(1, len(order) + 1)
    return [(float(n / len(order)), float(h / n)) for n, h in zip(answered, hits)]
