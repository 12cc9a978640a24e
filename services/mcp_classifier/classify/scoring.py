"""Building blocks of the scorers: per-category neighbour scores, softmax, entropy, the temperature fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TOP_K = 3  # nearest examples averaged per category: robust to one odd example, still local
DESCRIPTION_WEIGHT = 0.2  # share of the category description in the score
TEMPERATURE_BOUNDS = (1e-3, 1.0)


def top_k_mean(similarities: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """(B, M) similarities -> (B,) mean of each row's k largest finite entries (-inf entries, left out, are skipped).

    With no columns at all, -1: as far as a cosine goes."""
    if similarities.shape[1] == 0:
        return np.full(similarities.shape[0], -1.0)
    top = -np.sort(-similarities, axis=1)[:, : min(k, similarities.shape[1])]
    valid = np.isfinite(top)
    return np.where(valid, top, 0.0).sum(axis=1) / np.maximum(valid.sum(axis=1), 1)


def category_scores(
    similarities: np.ndarray,
    labels: np.ndarray,
    n_categories: int,
    description_sims: np.ndarray,
    top_k: int = TOP_K,
    description_weight: float = DESCRIPTION_WEIGHT,
) -> np.ndarray:
    """(B, N) example similarities -> (B, C) scores: mean of the top-k per category blended with the description.

    Entries of ``similarities`` set to -inf are ignored (leave-one-out). A category without examples scores its
    description's similarity.
    """
    scores = np.empty((similarities.shape[0], n_categories), dtype=np.float64)
    for c in range(n_categories):
        members = labels == c
        if not members.any():
            scores[:, c] = description_sims[:, c]
            continue
        example_score = top_k_mean(similarities[:, members], top_k)
        scores[:, c] = (1.0 - description_weight) * example_score + description_weight * description_sims[:, c]
    return scores


def softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    z = scores / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def entropy_nats(probabilities: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats (natural log) of each row."""
    p = np.clip(probabilities, 1e-12, 1.0)
    return -(probabilities * np.log(p)).sum(axis=1)


def _nll(scores: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    probs = softmax(scores, temperature)
    return float(-np.log(np.clip(probs[np.arange(len(labels)), labels], 1e-12, 1.0)).mean())


def fit_temperature(scores: np.ndarray, labels: np.ndarray, bounds: tuple[float, float] = TEMPERATURE_BOUNDS) -> float:
    """Temperature minimising held-out NLL; golden-section search on log T.

    Written by hand because the problem is one bounded scalar on a smooth, unimodal curve:
    pulling in scipy for minimize_scalar would add a heavy dependency for ten lines.
    """
    lo, hi = (math.log(b) for b in bounds)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo + (1 - ratio) * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = _nll(scores, labels, math.exp(a)), _nll(scores, labels, math.exp(b))
    for _ in range(60):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = lo + (1 - ratio) * (hi - lo)
            fa = _nll(scores, labels, math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = _nll(scores, labels, math.exp(b))
    return math.exp((lo + hi) / 2)


@dataclass(frozen=True)
class Calibration:
    temperature: float
    loo_accuracy: float
