"""The vLLM Semantic Router's checks on a remote classifier's answer (``label_distribution.v1``), as its issue states them.

Its ``HTTPClassifierInference`` POSTs ``{"inputs": ...}`` to ``/classify`` and accepts an answer only when it is a
2xx JSON array of ``{"label", "score"}`` naming every label of the classifier exactly once (in any order), each
score finite and in [0, 1], and, for a single-label classifier, the scores summing to 1 within 0.02. A list of
inputs gets a list of such arrays, one per input. Any other status is a failure whose body it reads as
``{"error": "..."}``. The tests replay these rules on real answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

SUM_TOLERANCE = 0.02


def check_distribution(answer: Any, labels: Sequence[str], *, multi_label: bool = False) -> dict[str, float]:
    """One answer's scores by label, after every rule the router applies; AssertionError names the broken one."""
    assert isinstance(answer, list), f"not a JSON array: {type(answer).__name__}"
    scores: dict[str, float] = {}
    for entry in answer:
        assert isinstance(entry, dict) and set(entry) == {"label", "score"}, f"not a {{label, score}} object: {entry}"
        label, score = entry["label"], entry["score"]
        assert isinstance(label, str), f"label is not a string: {entry}"
        assert label not in scores, f"label {label!r} appears twice"
        assert isinstance(score, int | float) and not isinstance(score, bool), f"score is not a number: {entry}"
        assert math.isfinite(score) and 0.0 <= score <= 1.0, f"score out of [0, 1]: {entry}"
        scores[label] = float(score)
    assert set(scores) == set(labels), f"labels {sorted(scores)} are not the classifier's {sorted(labels)}"
    if not multi_label:
        assert abs(sum(scores.values()) - 1.0) <= SUM_TOLERANCE, f"single-label scores sum to {sum(scores.values())}"
    return scores


def check_answer(
    response: httpx.Response, labels: Sequence[str], *, inputs: int | None = None, multi_label: bool = False
) -> list[dict[str, float]]:
    """A /classify response as the router takes it: 2xx JSON; one distribution, or ``inputs`` of them for a list."""
    assert 200 <= response.status_code < 300, (response.status_code, response.text)
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    body = response.json()
    if inputs is None:
        return [check_distribution(body, labels, multi_label=multi_label)]
    assert isinstance(body, list) and len(body) == inputs, f"{len(body)} distributions for {inputs} inputs"
    return [check_distribution(d, labels, multi_label=multi_label) for d in body]


def check_refusal(response: httpx.Response, status: int, sent: str = "") -> str:
    """A refusal as the router reads it: the status, a short JSON ``error``, and nothing of what was sent."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    assert len(response.content) < 1024, f"a long error body: {len(response.content)} bytes"
    if sent:
        assert sent not in response.text, "the error echoes the input"
    return str(body["error"])
