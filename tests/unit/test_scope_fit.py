"""The out-of-scope fit on vectors made for it, and eval's out-of-scope figures on answers made for them.

Synthetic unit vectors: three categories, each a tight bundle around its own direction, and off-topic
texts around other directions. What the fit must do: keep each category's own neighbourhood in scope,
put the off-topic neighbourhood out, let a threshold from the file decide alone, and report what it
expects. Then eval's figures, recomputed by hand on a dozen answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.classify import scope
from mcp_classifier.classify.scope import IN_SCOPE_PROBABILITY, fit_scope
from mcp_classifier.classify.scoring import top_k_mean
from mcp_classifier.evaluation.dataset import OUT_OF_SCOPE, load_dataset
from mcp_classifier.evaluation.metrics import Prediction, coverage_accuracy_curve, evaluate, scope_metrics

DIMENSIONS = 16
rng = np.random.default_rng(7)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _bundle(direction: int, n: int, spread: float = 0.12) -> np.ndarray:
    centre = np.zeros(DIMENSIONS)
    centre[direction] = 1.0
    return _unit(centre + spread * rng.standard_normal((n, DIMENSIONS)))


EXAMPLES = np.vstack([_bundle(0, 8), _bundle(1, 8), _bundle(2, 8)])
LABELS = np.repeat(np.arange(3), 8)
DESCRIPTIONS = _unit(np.eye(DIMENSIONS)[:3] + 0.1)
NEGATIVES = np.vstack([_bundle(d, 20) for d in (5, 6, 7, 8)])


def test_own_neighbourhoods_stay_in_and_off_topic_ones_go_out() -> None:
    scope = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, NEGATIVES)
    in_p, sims = scope.in_scope_probability(np.vstack([_bundle(c, 10) for c in range(3)]))
    out_p, _ = scope.in_scope_probability(np.vstack([_bundle(d, 10) for d in (9, 10, 11)]))  # directions never seen
    assert (in_p >= IN_SCOPE_PROBABILITY).mean() >= 0.9
    assert (out_p < IN_SCOPE_PROBABILITY).mean() >= 0.9
    assert sims.shape == (30, 3)
    assert min(scope.stats.coverage) >= 0.8 and scope.stats.out_of_scope_recall >= 0.9
    assert scope.stats.negatives == len(NEGATIVES) and not any(scope.stats.overridden)


def test_off_topic_texts_that_look_like_a_category_are_dropped_from_the_negatives() -> None:
    lookalikes = _bundle(1, 10, spread=0.05)  # as close to category 1 as its own examples
    scope = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, np.vstack([NEGATIVES, lookalikes]))
    assert scope.stats.negatives == len(NEGATIVES)
    in_p, _ = scope.in_scope_probability(_bundle(1, 10))
    assert (in_p >= IN_SCOPE_PROBABILITY).mean() >= 0.9


def test_a_file_that_takes_the_off_topic_texts_in_scope_is_broad_and_its_answers_keep_their_confidence() -> None:
    """Off-topic texts spread around the categories' own directions, a little looser than their examples: the fit takes
    a good share of them in scope, so the file is broad. Its in-scope answers are read against the examples' typical
    in-scope probability (a query like them keeps all of it); which queries are in scope does not change."""
    own_rng = np.random.default_rng(11)  # its own draws: the module's generator is at whatever the tests before left it
    near = _unit(np.repeat(np.eye(DIMENSIONS)[:3], 20, axis=0) + 0.3 * own_rng.standard_normal((60, DIMENSIONS)))
    broad = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, np.vstack([NEGATIVES, near]))
    narrow = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, NEGATIVES)
    assert broad.stats.background_in_scope >= scope.BROAD_FILE_BACKGROUND_SHARE and broad.stats.broad
    assert narrow.stats.background_in_scope < scope.BROAD_FILE_BACKGROUND_SHARE and not narrow.stats.broad
    queries = np.vstack([_bundle(c, 10, spread=0.2) for c in range(3)] + [_bundle(d, 10) for d in (9, 10)])
    served, _ = broad.in_scope_probability(queries)
    fitted = 1.0 / (1.0 + np.exp(-(scope._features(*_sims_and_background(broad, queries)) @ broad.weights + broad.bias)))
    typical = broad.stats.typical_in_scope()
    assert typical is not None and typical < 1.0
    inside = fitted >= IN_SCOPE_PROBABILITY
    assert inside.any() and (~inside).any()
    np.testing.assert_array_equal(served >= IN_SCOPE_PROBABILITY, inside)
    np.testing.assert_allclose(served[inside], np.minimum(fitted[inside] / typical, 1.0))
    np.testing.assert_allclose(served[~inside], fitted[~inside])
    assert max(broad.stats.served_typical()) == pytest.approx(1.0)
    public = broad.stats.to_public(["a", "b", "c"])
    assert public["broad_file"] is True and public["typical_in_scope_probability"] == pytest.approx(1.0)
    # the share is read on the packaged background alone: the file's own off-topic texts (first) do not count, and
    # without the packaged set (--scope-background off) no file is judged broad
    own_first = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, np.vstack([near, NEGATIVES]), background_from=len(near))
    assert own_first.stats.background_in_scope == 0.0 and not own_first.stats.broad
    assert not fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, np.vstack([NEGATIVES, near]), background_from=None).stats.broad


def _sims_and_background(model: scope.ScopeModel, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sims = scope.category_similarities(queries, model.example_vectors, model.labels, queries @ model.description_vectors.T)
    return sims, model.centres, top_k_mean(queries @ model.background_vectors.T, scope.SCOPE_TOP_K)


def test_a_threshold_from_the_file_decides_alone() -> None:
    strict = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, NEGATIVES, overrides=(0.999, None, None))
    assert strict.stats.thresholds[0] == 0.999 and strict.stats.overridden == (True, False, False)
    p, _ = strict.in_scope_probability(_bundle(0, 10))
    assert (p < IN_SCOPE_PROBABILITY).all()  # nothing is that close to category 0's examples
    p_other, _ = strict.in_scope_probability(_bundle(1, 10))
    assert (p_other >= IN_SCOPE_PROBABILITY).mean() >= 0.9  # the others keep their fitted thresholds


def test_without_negatives_the_fit_still_answers_from_the_examples_alone() -> None:
    scope = fit_scope(EXAMPLES, LABELS, DESCRIPTIONS, np.zeros((0, DIMENSIONS)))
    in_p, _ = scope.in_scope_probability(_bundle(2, 10))
    out_p, _ = scope.in_scope_probability(_bundle(12, 10))
    assert in_p.mean() > out_p.mean()
    assert scope.stats.negatives == 0


def _own_centres(monkeypatch: pytest.MonkeyPatch, examples: np.ndarray, labels: np.ndarray, descriptions: np.ndarray) -> np.ndarray:
    """The centres each category fits from its own examples alone: no category counts as small."""
    with monkeypatch.context() as patch:
        patch.setattr(scope, "SMALL_CATEGORY_EXAMPLES", 1)
        return fit_scope(examples, labels, descriptions, NEGATIVES).centres


def test_a_small_category_borrows_the_centre_of_the_larger_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three loose examples beside three tight categories of 8: filled up to SMALL_CATEGORY_EXAMPLES with the pool of
    the large ones (weighted by their example counts), its threshold rises with its centre; the large keep theirs."""
    examples = np.vstack([EXAMPLES, _bundle(3, 3, spread=0.5)])
    labels = np.concatenate([LABELS, [3, 3, 3]])
    descriptions = _unit(np.eye(DIMENSIONS)[:4] + 0.1)
    own = _own_centres(monkeypatch, examples, labels, descriptions)
    pooled = fit_scope(examples, labels, descriptions, NEGATIVES)
    share = 3 / scope.SMALL_CATEGORY_EXAMPLES
    assert pooled.centres[:3] == pytest.approx(own[:3])
    assert pooled.centres[3] == pytest.approx(share * own[3] + (1 - share) * own[:3].mean())
    assert own[3] < pooled.centres[3] < own[:3].min()  # the loose one sits below the tight ones, and is lifted
    with monkeypatch.context() as patch:
        patch.setattr(scope, "SMALL_CATEGORY_EXAMPLES", 1)
        alone = fit_scope(examples, labels, descriptions, NEGATIVES)
    assert pooled.stats.thresholds[3] > alone.stats.thresholds[3]


def test_where_every_category_is_small_the_prior_comes_from_the_off_topic_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every category's own figures are biased low alike: the prior is how close each off-topic text is to its
    nearest others (the median of their top-k mean, each left out)."""
    keep = np.concatenate([np.flatnonzero(LABELS == c)[:3] for c in range(3)])
    examples, labels = EXAMPLES[keep], LABELS[keep]
    own = _own_centres(monkeypatch, examples, labels, DESCRIPTIONS)
    among = NEGATIVES @ NEGATIVES.T
    np.fill_diagonal(among, -np.inf)
    prior = float(np.median(top_k_mean(among, scope.SCOPE_TOP_K)))
    share = 3 / scope.SMALL_CATEGORY_EXAMPLES
    assert fit_scope(examples, labels, DESCRIPTIONS, NEGATIVES).centres == pytest.approx(share * own + (1 - share) * prior)


def test_null_labels_are_out_of_scope_queries(tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    rows = [{"text": "refund please", "label": "billing"}, {"text": "hi there", "label": None}, {"text": "ok", "category": "null"}]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    assert [q.category for q in load_dataset(data)] == ["billing", OUT_OF_SCOPE, OUT_OF_SCOPE]


def test_eval_figures_for_out_of_scope_queries_match_a_hand_count() -> None:
    truth = ["a", "a", "b", "b", OUT_OF_SCOPE, OUT_OF_SCOPE, OUT_OF_SCOPE]
    predictions = [
        Prediction("a", 0.9),  # right
        Prediction(OUT_OF_SCOPE, 0.3),  # an in-scope query said to be out: a miss, and not covered
        Prediction("a", 0.6),  # wrong category
        Prediction("b", 0.8),  # right
        Prediction(OUT_OF_SCOPE, 0.1),  # caught
        Prediction(OUT_OF_SCOPE, 0.2),  # caught
        Prediction("b", 0.7),  # missed: answered with a category
    ]
    figures = scope_metrics(truth, predictions)
    assert figures["in_scope_accuracy"] == pytest.approx(2 / 4)
    assert figures["coverage"] == pytest.approx(3 / 4)
    assert figures["out_of_scope_recall"] == pytest.approx(2 / 3)
    assert figures["out_of_scope_precision"] == pytest.approx(2 / 3)
    # In-scope confidences 0.9 0.3 0.6 0.8 against out-of-scope 0.1 0.2 0.7: pairs won 3+2+2+3 = 10 of 12.
    assert figures["auroc"] == pytest.approx(10 / 12)
    report = evaluate("x", truth, predictions, [None] * 7, [f"t{i}" for i in range(7)])
    assert report.scope == figures
    curve = coverage_accuracy_curve(truth, predictions)
    assert curve[0] == (pytest.approx(1 / 7), 1.0)  # the most confident answer alone is right
    assert curve[-1] == (1.0, pytest.approx(2 / 7))  # answering everything: the two right answers of seven
