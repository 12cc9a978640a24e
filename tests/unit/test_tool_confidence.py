"""The tool filter's per-tool confidence rule (tool_confidence), in-process; tests/unit/test_tool_filter.py checks both doors."""

from __future__ import annotations

import numpy as np

from mcp_classifier.toolfilter.tool_confidence import tool_confidences
from mcp_classifier.toolfilter.tool_ranking import Ranked


def ranked(keys: list[float]) -> Ranked:
    values = np.asarray(keys)
    return Ranked(np.argsort(-values, kind="stable").tolist(), values)


def test_a_clear_first_tool_is_likely_needed_and_the_tail_is_not() -> None:
    keys = [6.0, 0.5, 0.3, 0.1, -0.2, -0.5, -0.8, -1.0]  # z units: a clear first tool of a long list
    confidence = tool_confidences(ranked(keys), 1, "hybrid")
    assert confidence[0] > 0.8 and confidence[-1] < 0.05
    assert np.all((confidence > 0) & (confidence < 1))
    assert np.all(np.diff(confidence) < 0)  # keys and places both fall along this order


def test_a_close_second_is_less_sure_than_a_clear_first_and_more_than_a_far_one() -> None:
    close = tool_confidences(ranked([2.0, 1.9, -0.5, -0.6]), 1, "hybrid")
    far = tool_confidences(ranked([3.0, 0.2, -0.5, -0.6]), 1, "hybrid")
    assert far[0] > close[0] and close[1] > far[1]


def test_a_request_with_several_asks_needs_more_of_its_tools() -> None:
    keys = ranked([2.5, 1.5, 1.0, 0.0, -1.0])
    assert np.all(tool_confidences(keys, 2, "hybrid") > tool_confidences(keys, 1, "hybrid"))


def test_the_embedding_order_has_its_own_fit_and_an_empty_list_has_none() -> None:
    keys = ranked([2.0, 0.5, -0.5, -2.0])
    assert not np.allclose(tool_confidences(keys, 1, "embedding"), tool_confidences(keys, 1, "hybrid"))
    assert len(tool_confidences(Ranked([], np.zeros(0)), 1, "hybrid")) == 0
