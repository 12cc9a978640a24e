"""The shipped tool ranking on the project's six tool-retrieval sets (datasets/tool-retrieval), with the real builtin:minilm.

Guards what the tool-retrieval decision records report: on every set hybrid ranks better than either of its
parts and the default threshold leaves no request without tools; averaged over the sets, the action words, the
identifiers' parameter words and the ranking of a request's parts do not cost recall@5 (on a single
set some of them do: blind-2's parts ranking is 0.008 below the whole request's); and on blind-1, blind-2
and blind-4, written independently, hybrid meets recall@5 >= 0.90. blind-3, written after the method was
fixed, reads 0.857: it is in the per-set and mean checks, not in the target. blind-4 (416 queries, written
blind and run once on the unchanged method) reads 0.920.
The model is deterministic on CPU, so these are exact reruns of the documented figures, not samples.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pytest

from mcp_classifier.cli import main
from mcp_classifier.evaluation.metrics import auroc, expected_calibration_error
from mcp_classifier.evaluation.tool_retrieval import RankedSet, RetrievalQuery, load_tool_set, rank_all, score, served_outcome
from mcp_classifier.settings import Settings
from mcp_classifier.toolfilter.tool_filter import DEFAULT_TOP_K, default_threshold_for
from mcp_classifier.wiring import build_classifier

DATASETS = Path(__file__).resolve().parents[2] / "datasets" / "tool-retrieval"
SETS = ["dev", "heldout", "blind-1", "blind-2", "blind-3", "blind-4"]
ABLATIONS = ["hybrid-plain", "hybrid-whole", "hybrid-unshaped"]  # the action words, the parts, the identifier words
Embed = Callable[[list[str], str], np.ndarray]


@pytest.fixture(scope="module")
def embed() -> Embed:
    return build_classifier(Settings()).embed


@pytest.fixture(scope="module")
def ranked_sets(embed: Embed) -> dict[str, tuple[list[RetrievalQuery], RankedSet]]:
    """Per set, its queries and every system's rankings, from one pass of the encoder."""
    settings = Settings()
    by_set = {}
    for name in SETS:
        tools, queries = load_tool_set(DATASETS / name / "queries.jsonl", DATASETS / name / "tools.json")
        by_set[name] = (queries, rank_all(tools, queries, embed, settings.serving.max_text_length, settings.toolfilter.tool_lexical_weight))
    return by_set


@pytest.fixture(scope="module")
def recall_at_5(ranked_sets: dict[str, tuple[list[RetrievalQuery], RankedSet]]) -> dict[str, dict[str, float]]:
    """Per set, each system's recall@5; the served outcomes are checked on the way."""
    settings = Settings()
    by_set = {}
    for name, (queries, ranked) in ranked_sets.items():
        by_set[name] = {system: score(system, ranking, queries).recall[5] for system, ranking in ranked.rankings.items()}
        # what a caller with the defaults gets: the model's threshold costs almost nothing and leaves no request toolless
        served = served_outcome(ranked, queries, DEFAULT_TOP_K, default_threshold_for(settings.model.name))
        unthresholded = served_outcome(ranked, queries, DEFAULT_TOP_K, -1.0)
        assert served.empty == 0 and served.recall >= unthresholded.recall - 0.015, (name, served, unthresholded)
    return by_set


@pytest.mark.parametrize("name", SETS)
def test_hybrid_beats_its_parts_on_every_set(recall_at_5: dict[str, dict[str, float]], name: str) -> None:
    recall5 = recall_at_5[name]
    assert recall5["hybrid"] > recall5["bm25"], recall5
    assert recall5["hybrid"] > recall5["embedding"], recall5
    assert recall5["bm25-actions"] >= recall5["bm25"], recall5


def test_each_addition_to_hybrid_costs_nothing_on_average_over_the_sets(recall_at_5: dict[str, dict[str, float]]) -> None:
    mean = {system: float(np.mean([recall_at_5[name][system] for name in SETS])) for system in ["hybrid", *ABLATIONS]}
    for ablation in ABLATIONS:
        assert mean["hybrid"] >= mean[ablation], mean


INDEPENDENT_SETS = {"blind-1": 45, "blind-2": 49, "blind-4": 101}  # written apart from the method: set -> two-tool queries


@pytest.mark.parametrize("name", sorted(INDEPENDENT_SETS))
def test_hybrid_meets_the_target_on_the_independent_sets(recall_at_5: dict[str, dict[str, float]], name: str) -> None:
    assert recall_at_5[name]["hybrid"] >= 0.90, recall_at_5[name]
    queries = [orjson.loads(line) for line in (DATASETS / name / "queries.jsonl").read_bytes().splitlines() if line.strip()]
    assert sum(len(q["relevant"]) >= 2 for q in queries) == INDEPENDENT_SETS[name]


def test_eval_tools_reports_the_target_met_on_an_independent_set(capsys: pytest.CaptureFixture[str]) -> None:
    """The command a user runs, on the smallest independent set (the others' figures are the fixture's, above)."""
    assert main(["eval-tools", str(DATASETS / "blind-1" / "queries.jsonl")]) == 0
    out = capsys.readouterr().out
    hybrid = next(line for line in out.splitlines() if line.startswith("| hybrid: "))
    recall_at_1, recall_at_5 = (float(cell) for cell in hybrid.strip("|").split("|")[3:5])
    assert recall_at_5 >= 0.90 and recall_at_1 < recall_at_5
    assert f"| needs two or more | {INDEPENDENT_SETS['blind-1']} |" in out  # the slice table follows


def test_tool_confidence_holds_on_a_set_it_was_not_fitted_on(ranked_sets: dict[str, tuple[list[RetrievalQuery], RankedSet]]) -> None:
    """`heldout` was left out of tool_confidence's fit: over the first ten tools of each request, the confidence
    select_tools gives is calibrated (ECE 0.019) and ranks needed tools above the others (AUROC 0.933), as
    docs/decisions/0044-tool-confidence-and-needs.md reports."""
    queries, ranked = ranked_sets["heldout"]
    column = {name: i for i, name in enumerate(ranked.names)}
    said, needed = [], []
    for row, (order, query) in enumerate(zip(ranked.rankings["hybrid"], queries)):
        for name in order[:10]:
            said.append(ranked.confidences["hybrid"][row, column[name]])
            needed.append(name in query.relevant)
    confidence, truth = np.asarray(said), np.asarray(needed)
    assert expected_calibration_error(confidence, truth.astype(float))[0] <= 0.03
    assert auroc(confidence[truth], confidence[~truth]) >= 0.92
    assert confidence[truth].mean() > 4 * confidence[~truth].mean()
