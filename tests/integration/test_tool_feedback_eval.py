"""Feedback from use measured with the real builtin:minilm on the platform set (datasets/tool-retrieval/platform: 40 tools,
six one-tool requests each), as `eval-tools --feedback 3` prints it and docs/tool-filter.md reports it.

Three of each tool's requests are given as feedback, the other three measured. The model is deterministic on CPU, so
these are exact reruns of the documented figures: with the tools' descriptions, feedback moves recall@5 within the
noise of 120 requests; with the tools' names alone it lifts it clearly; a request asked again finds its tool first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.cli import main
from mcp_classifier.evaluation.tool_retrieval import feedback_rankings, feedback_split, load_tool_set, score
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

PLATFORM = Path(__file__).resolve().parents[2] / "datasets" / "tool-retrieval" / "platform"
Embed = Callable[[list[str], str], np.ndarray]


@pytest.fixture(scope="module")
def embed() -> Embed:
    return build_classifier(Settings()).embed


def _recall_at_5(embed: Embed, tools_file: str) -> tuple[float, float]:
    settings = Settings()
    tools, queries = load_tool_set(PLATFORM / "queries.jsonl", PLATFORM / tools_file)
    split = feedback_split(queries, 3)
    assert (len(split.past), len(split.held), split.tools) == (120, 120, 40)
    weights = (settings.toolfilter.tool_lexical_weight, settings.toolfilter.tool_feedback_weight)
    without, with_past = feedback_rankings(tools, split, embed, settings.serving.max_text_length, weights)
    return score("without", without, split.held).recall[5], score("with", with_past, split.held).recall[5]


def test_with_descriptions_feedback_stays_within_the_noise(embed: Embed) -> None:
    without, with_past = _recall_at_5(embed, "tools.json")
    assert without == pytest.approx(0.917, abs=1e-3)
    assert abs(with_past - without) <= 0.025, (without, with_past)  # three requests of 120 either way


def test_with_names_alone_feedback_lifts_recall(embed: Embed) -> None:
    without, with_past = _recall_at_5(embed, "tools-names-only.json")
    assert without == pytest.approx(0.783, abs=1e-3)
    assert with_past >= without + 0.05, (without, with_past)


def test_eval_tools_prints_the_feedback_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-tools", str(PLATFORM / "queries.jsonl"), "--feedback", "3"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    again = next(line for name, line in rows.items() if name.startswith("the same with their own feedback"))
    assert again.split("|")[4].strip() == "1.000"  # asked again word for word, the tool is first every time
    assert any(name.startswith("the same with feedback from 3 past requests per tool") for name in rows)
