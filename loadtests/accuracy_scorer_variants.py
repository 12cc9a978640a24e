#!/usr/bin/env python
"""Scorer variants tried against the service's own scorers, embeddings only (docs/accuracy, session 20: "not kept").

Every variant is fitted on a set's examples and descriptions, as the service's scorers are, and scores
the set's held-out queries (word matches off, so the embedding side alone is compared). For each it
prints the accuracy pooled over the six few-shot sets (every held-out query of the sets that bring
their own categories file), the ECE on those, the mean over the three router sets, and each set.
The variants, each a common remedy for a head fitted on six to ten examples a category:
  * kernel: a soft top-k (log-mean-exp of the similarities, sharpness chosen by leave-one-out);
  * csls: neighbours with each example's similarity corrected for how close it sits to all others;
  * mean3: linear, prototype and neighbours averaged (the shipped `ensemble` averages the first two);
  * auto-by-accuracy: auto choosing by out-of-fold accuracy instead of log loss;
  * linear without intercept / on standardised features / with within-category mixup points;
  * linear on the query pulled towards its three nearest examples (pseudo-relevance feedback);
  * linear over a prototype prior: z = a * prototype(x) + W x + b, the prototype scores out of fold;
  * linear on the first 64 principal components of the file's own vectors.
About 2 minutes on 2 cores (the prototype prior is most of it).

Usage (from the repository root):
    python -m loadtests.accuracy_scorer_variants [--sets docs/accuracy/sets] [--variants linear,kernel]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from mcp_classifier.core import scorers
from mcp_classifier.core.categories import load_categories
from mcp_classifier.core.scoring import DESCRIPTION_WEIGHT, category_scores, fit_temperature, softmax
from mcp_classifier.evaluation.metrics import expected_calibration_error
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

from .accuracy_methods import load_set

Fitter = Callable[[np.ndarray, np.ndarray, np.ndarray, int], scorers.FittedScorer]
KERNEL_SHARPNESS = (5.0, 10.0, 20.0, 40.0, 80.0)
CSLS_NEIGHBOURS = 5
MIXUP_PER_EXAMPLE = 2
FEEDBACK_WEIGHT, FEEDBACK_NEIGHBOURS = 0.5, 3
PRIOR_STRENGTHS = (1.0, 4.0, 16.0, 64.0, 256.0)
PCA_COMPONENTS = 64


@dataclass(frozen=True)
class SetVectors:
    name: str
    few_shot: bool
    examples: np.ndarray
    labels: np.ndarray
    descriptions: np.ndarray
    queries: np.ndarray
    truth: np.ndarray


def embed_sets(folder: Path, model: str) -> list[SetVectors]:
    encoder = build_classifier(Settings(model=model)).encoder
    out = []
    for path in sorted(p for p in folder.iterdir() if (p / "queries.jsonl").exists()):
        categories_file, queries = load_set(path)
        config = load_categories(categories_file)
        examples = [(text, i) for i, c in enumerate(config.categories) for text in c.examples]
        out.append(
            SetVectors(
                path.name,
                categories_file is not None,
                encoder.encode_documents([t for t, _ in examples]),
                np.array([i for _, i in examples]),
                encoder.encode_documents([c.description or c.name for c in config.categories]),
                encoder.encode_queries([q["text"] for q in queries]),
                np.array([config.names.index(q["category"]) for q in queries]),
            )
        )
    return out


@dataclass(frozen=True)
class FunctionScorer:
    score: Callable[[np.ndarray], np.ndarray]

    def scores(self, query_vectors: np.ndarray) -> np.ndarray:
        return self.score(query_vectors)


def _log_probs(fitted: scorers.FittedScorer, scores: np.ndarray) -> np.ndarray:
    return np.log(np.clip(softmax(scores, fitted.temperature), 1e-12, 1.0))


def _soft_top_k(sims: np.ndarray, labels: np.ndarray, description_sims: np.ndarray, n: int, sharpness: float) -> np.ndarray:
    out = np.empty((len(sims), n))
    for c in range(n):
        members = np.concatenate([sims[:, labels == c], description_sims[:, [c]]], axis=1) * sharpness
        top = members.max(axis=1, keepdims=True)
        finite = np.isfinite(members)
        out[:, c] = (top[:, 0] + np.log(np.where(finite, np.exp(members - top), 0.0).sum(axis=1) / finite.sum(axis=1))) / sharpness
    return out


def fit_kernel(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    loo = ev @ ev.T
    np.fill_diagonal(loo, -np.inf)
    best = None
    for sharpness in KERNEL_SHARPNESS:
        oof = _soft_top_k(loo, el, ev @ dv.T, n, sharpness)
        t = fit_temperature(oof, el)
        nll = scorers._nll(softmax(oof, t), el)
        if best is None or nll < best[0]:
            best = (nll, sharpness, t, oof)
    assert best is not None
    _, sharpness, t, oof = best
    return scorers.FittedScorer(FunctionScorer(lambda q: _soft_top_k(q @ ev.T, el, q @ dv.T, n, sharpness)), t, oof, el, "kernel")


def fit_csls(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    loo = ev @ ev.T
    np.fill_diagonal(loo, -np.inf)
    hubness = np.sort(loo, axis=1)[:, -CSLS_NEIGHBOURS:].mean(axis=1)
    oof = category_scores(2 * loo - hubness, el, n, 2 * (ev @ dv.T))
    scorer = FunctionScorer(lambda q: category_scores(2 * (q @ ev.T) - hubness, el, n, 2 * (q @ dv.T)))
    return scorers.FittedScorer(scorer, fit_temperature(oof, el), oof, el, "csls")


def fit_mean3(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    members = [scorers.fit_linear(ev, el, dv, n), scorers.fit_neighbours(ev, el, dv, n, 0.5), scorers.fit_neighbours(ev, el, dv, n)]
    oof = np.mean([_log_probs(m, m.out_of_fold) for m in members], axis=0)
    scorer = FunctionScorer(lambda q: np.mean([_log_probs(m, m.scorer.scores(q)) for m in members], axis=0))
    return scorers.FittedScorer(scorer, fit_temperature(oof, el, bounds=(1e-2, 10.0)), oof, el, "mean3")


def fit_auto_by_accuracy(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    fitted = [scorers.FITTERS[m](ev, el, dv, n) for m in scorers.AUTO_CANDIDATES]
    return max(fitted, key=lambda f: (round(f.held_out_accuracy, 6), -f.out_of_fold_log_loss))


def _head(intercept: bool, standardise: bool, mixup: bool) -> Callable[[np.ndarray, np.ndarray, int, float], scorers.LinearScorer]:
    def fit(x: np.ndarray, y: np.ndarray, n: int, strength: float) -> scorers.LinearScorer:
        if mixup:  # convex pairs within a category, back on the unit sphere
            rng = np.random.default_rng(scorers.SEED)
            extra_x, extra_y = [x], [y]
            for c in np.unique(y):
                members = x[y == c]
                for _ in range(MIXUP_PER_EXAMPLE * len(members) if len(members) > 1 else 0):
                    i, j = rng.choice(len(members), 2, replace=False)
                    share = rng.uniform(0.2, 0.8)
                    mixed = share * members[i] + (1 - share) * members[j]
                    extra_x.append(mixed[None] / np.linalg.norm(mixed))
                    extra_y.append(np.array([c]))
            x, y = np.vstack(extra_x), np.concatenate(extra_y)
        mean = x.mean(axis=0) if standardise else np.zeros(x.shape[1])
        scale = x.std(axis=0) + 1e-3 if standardise else np.ones(x.shape[1])
        model = LogisticRegression(C=strength, max_iter=2000, fit_intercept=intercept).fit((x - mean) / scale, y)
        weights = np.zeros((n, x.shape[1]))
        bias = np.full(n, -1e3)
        weights[model.classes_] = model.coef_ / scale
        bias[model.classes_] = model.intercept_ - (model.coef_ / scale) @ mean
        return scorers.LinearScorer(weights, bias)

    return fit


def fit_linear_with(
    head: Callable[..., scorers.LinearScorer], ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int
) -> scorers.FittedScorer:
    shipped = scorers._fit_linear
    scorers._fit_linear = head  # the shipped strength search and out-of-fold temperature, another head inside
    try:
        return scorers.fit_linear(ev, el, dv, n)
    finally:
        scorers._fit_linear = shipped


def fit_feedback(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    fitted = scorers.fit_linear(ev, el, dv, n)
    points = np.vstack([ev, dv])

    def score(q: np.ndarray) -> np.ndarray:
        nearest = points[np.argsort(-(q @ points.T), axis=1)[:, :FEEDBACK_NEIGHBOURS]].mean(axis=1)
        moved = q + FEEDBACK_WEIGHT * nearest
        return fitted.scorer.scores(moved / np.linalg.norm(moved, axis=1, keepdims=True))

    return scorers.FittedScorer(FunctionScorer(score), fitted.temperature, fitted.out_of_fold, el, "feedback")


def _prototype_prior(q: np.ndarray, ev: np.ndarray, el: np.ndarray, dv: np.ndarray) -> np.ndarray:
    return (1 - DESCRIPTION_WEIGHT) * (q @ scorers.centroids(ev, el, dv).T) + DESCRIPTION_WEIGHT * (q @ dv.T)


def _leave_one_out_prior(ev: np.ndarray, el: np.ndarray, dv: np.ndarray) -> np.ndarray:
    out = np.empty((len(el), dv.shape[0]))
    for i in range(len(el)):
        keep = np.arange(len(el)) != i
        out[i] = _prototype_prior(ev[i : i + 1], ev[keep], el[keep], dv)[0]
    return out


def _fit_offset_head(x: np.ndarray, prior: np.ndarray, y: np.ndarray, n: int, strength: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Multinomial logistic loss with the prior as an offset scaled by one free scalar; scikit-learn has no offsets."""
    onehot = np.eye(n)[y]
    d = x.shape[1]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, w = theta[0], theta[1 : n + 1], theta[n + 1 :].reshape(n, d)
        z = a * prior + x @ w.T + b
        z = z - z.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        g = strength * (np.exp(log_p) - onehot)
        value = -strength * float((onehot * log_p).sum()) + 0.5 * float((w**2).sum())
        return value, np.concatenate([[float((g * prior).sum())], g.sum(axis=0), (g.T @ x + w).ravel()])

    start = np.zeros(1 + n + n * d)
    start[0] = 10.0
    theta = minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 500}).x
    return float(theta[0]), theta[1 : n + 1], theta[n + 1 :].reshape(n, d)


def fit_prior_head(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    def train(idx: np.ndarray) -> FunctionScorer:
        e, lab = ev[idx], el[idx]
        x = np.vstack([e, dv])
        prior = np.vstack([_leave_one_out_prior(e, lab, dv), _prototype_prior(dv, e, lab, dv)])
        a, b, w = _fit_offset_head(x, prior, np.concatenate([lab, np.arange(n)]), n, strength)
        return FunctionScorer(lambda q: a * _prototype_prior(q, e, lab, dv) + q @ w.T + b)

    folds = scorers.stratified_folds(el, max(2, min(scorers.CV_FOLDS, int(np.bincount(el).max()))))
    best = None
    for strength in PRIOR_STRENGTHS:
        oof = np.zeros((len(el), n))
        for held_out in folds:
            oof[held_out] = train(np.setdiff1d(np.arange(len(el)), held_out)).scores(ev[held_out])
        t = fit_temperature(oof, el, bounds=(1e-2, 10.0))
        nll = scorers._nll(softmax(oof, t), el)
        if best is None or nll < best[0]:
            best = (nll, strength, t, oof)
    assert best is not None
    _, strength, t, oof = best
    return scorers.FittedScorer(train(np.arange(len(el))), t, oof, el, "prior-head")


def fit_pca_linear(ev: np.ndarray, el: np.ndarray, dv: np.ndarray, n: int) -> scorers.FittedScorer:
    points = np.vstack([ev, dv])
    centre = points.mean(axis=0)
    basis = np.linalg.svd(points - centre, full_matrices=False)[2][:PCA_COMPONENTS].T

    def project(v: np.ndarray) -> np.ndarray:
        z = (v - centre) @ basis
        return z / np.linalg.norm(z, axis=1, keepdims=True)

    fitted = scorers.fit_linear(project(ev), el, project(dv), n)
    return scorers.FittedScorer(
        FunctionScorer(lambda q: fitted.scorer.scores(project(q))), fitted.temperature, fitted.out_of_fold, el, "pca"
    )


VARIANTS: dict[str, Fitter] = {
    **{m: scorers.FITTERS[m] for m in ("linear", "neighbours", "prototype", "ensemble", "auto")},
    "kernel": fit_kernel,
    "csls": fit_csls,
    "mean3": fit_mean3,
    "auto-by-accuracy": fit_auto_by_accuracy,
    "linear-no-intercept": partial(fit_linear_with, _head(intercept=False, standardise=False, mixup=False)),
    "linear-standardised": partial(fit_linear_with, _head(intercept=True, standardise=True, mixup=False)),
    "linear-mixup": partial(fit_linear_with, _head(intercept=True, standardise=False, mixup=True)),
    "linear-feedback": fit_feedback,
    "linear-prototype-prior": fit_prior_head,
    f"linear-pca{PCA_COMPONENTS}": fit_pca_linear,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", type=Path, default=Path("docs/accuracy/sets"))
    parser.add_argument("--model", default="builtin:minilm")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    sets = embed_sets(args.sets, args.model)
    print("| variant | few-shot pooled | ECE | router sets, mean | " + " | ".join(s.name for s in sets) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(sets))
    for name in args.variants.split(","):
        accuracy, correct, confidence = [], [], []
        for s in sets:
            probabilities = VARIANTS[name](s.examples, s.labels, s.descriptions, int(s.descriptions.shape[0])).probabilities(s.queries)
            ok = probabilities.argmax(axis=1) == s.truth
            accuracy.append(float(ok.mean()))
            if s.few_shot:
                correct.append(ok)
                confidence.append(probabilities.max(axis=1))
        pooled, conf = np.concatenate(correct), np.concatenate(confidence)
        router = [a for a, s in zip(accuracy, sets) if not s.few_shot]
        print(
            f"| {name} | {pooled.mean():.3f} | {expected_calibration_error(conf, pooled)[0]:.3f} | {np.mean(router):.3f} | "
            + " | ".join(f"{a:.3f}" for a in accuracy)
            + " |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
