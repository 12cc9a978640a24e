"""The vLLM Semantic Router's remote-classifier contract, ``label_distribution.v1``: pure, no I/O.

The router's ``HTTPClassifierInference`` POSTs ``{"inputs": "<text>"}`` (or a list of texts) and reads, per text, a
JSON array of ``{"label", "score"}`` over every label of the classifier: each label once, each score finite and in
[0, 1], and for a single-label classifier scores that sum to 1 (within 0.02). This module reads the request and
shapes a ClassificationResult into that array (docs/protocol.md, "The router's remote classifier").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..classify.categories import CategoryConfig
from ..classify.results import ClassificationResult
from .jsonrpc import INVALID_PARAMS, INVALID_REQUEST, JsonRpcError
from .schema_errors import empty_text

CONTRACT = "label_distribution.v1"
INPUTS = "inputs"


@dataclass(frozen=True)
class LabelSet:
    """What a distribution is over: the categories in class order, then the fallback label where the file names one."""

    categories: tuple[str, ...]
    fallback_label: str | None = None
    multi_label: bool = False

    @classmethod
    def of(cls, config: CategoryConfig) -> LabelSet:
        return cls(tuple(config.names), config.fallback_label, config.multi_label)

    @property
    def labels(self) -> list[str]:
        return [*self.categories, *([self.fallback_label] if self.fallback_label is not None else [])]


@dataclass(frozen=True)
class RouterRequest:
    texts: list[str]
    batched: bool  # inputs was a list: the answer is a list of distributions, one per text


def read_router_request(body: Any, max_text_length: int, max_batch_texts: int) -> RouterRequest:
    """The texts of a ``{"inputs": ...}`` body; JsonRpcError (400) says what is wrong without echoing the input.

    Other keys are ignored: the body is the router's, and the contract names only ``inputs``."""
    if not isinstance(body, dict):
        raise JsonRpcError(INVALID_REQUEST, f'the request body must be a JSON object with "{INPUTS}", not {_kind(body)}')
    if INPUTS not in body:
        raise JsonRpcError(INVALID_PARAMS, f'\'{INPUTS}\' is missing: send {{"{INPUTS}": "<text>"}} or a list of texts')
    inputs = body[INPUTS]
    if isinstance(inputs, str):
        _check_text(inputs, f"'{INPUTS}'", max_text_length)
        return RouterRequest([inputs], batched=False)
    if not isinstance(inputs, list):
        raise JsonRpcError(INVALID_PARAMS, f"'{INPUTS}' must be a string or a list of strings, not {_kind(inputs)}")
    if not inputs:
        raise JsonRpcError(INVALID_PARAMS, f"'{INPUTS}' is an empty list: send at least one text")
    if len(inputs) > max_batch_texts:
        raise JsonRpcError(INVALID_PARAMS, f"'{INPUTS}' has {len(inputs)} items: at most {max_batch_texts} are allowed")
    for i, text in enumerate(inputs):
        if not isinstance(text, str):
            raise JsonRpcError(INVALID_PARAMS, f"'{INPUTS}' item {i + 1} is {_kind(text)}, not a string")
        _check_text(text, f"'{INPUTS}' item {i + 1}", max_text_length)
    return RouterRequest(list(inputs), batched=True)


def _check_text(text: str, subject: str, max_text_length: int) -> None:
    if not any(ch.isprintable() and not ch.isspace() for ch in text):
        raise JsonRpcError(INVALID_PARAMS, empty_text(subject))
    if len(text) > max_text_length:
        raise JsonRpcError(INVALID_PARAMS, f"{subject} is longer than {max_text_length} characters")


def _kind(value: object) -> str:
    """A value's JSON type, never the value: an error must not echo the input."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def label_distribution(result: ClassificationResult, labels: LabelSet) -> list[dict[str, Any]]:
    """One answer as the router reads it: ``[{"label", "score"}, ...]`` over ``labels.labels``, in that order.

    Single-label: the category probabilities (they sum to 1). With a fallback label, the categories are scaled by
    the probability that the query fits them at all and the fallback label carries the rest, so the sum stays 1.
    Multi-label: each category's independent score (``result.label_scores``), and the fallback label's is the
    probability that the query fits no category.
    """
    if len(result.probabilities) != len(labels.categories):
        raise ValueError(f"an answer with {len(result.probabilities)} probabilities for {len(labels.categories)} categories")
    in_scope = _unit(result.scope_probability)
    if labels.multi_label:
        scores = _multi_label_scores(result, in_scope)
    elif labels.fallback_label is not None:
        scores = [p * in_scope for p in result.probabilities]
    else:
        scores = list(result.probabilities)
    if labels.fallback_label is not None:
        scores.append(1.0 - in_scope)
    return [{"label": label, "score": _unit(score)} for label, score in zip(labels.labels, scores)]


def _multi_label_scores(result: ClassificationResult, in_scope: float) -> list[float]:
    """The independent per-category scores; an answer without them (a replica that predates them) gives the
    category probabilities scaled by the in-scope probability, which are in [0, 1] too."""
    if len(result.label_scores) == len(result.probabilities):
        return list(result.label_scores)
    return [p * in_scope for p in result.probabilities]


def _unit(value: float) -> float:
    """A score the router accepts: finite and in [0, 1] (a float's last bit past 1 is clipped)."""
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def label_distributions(results: Sequence[ClassificationResult], labels: LabelSet) -> list[list[dict[str, Any]]]:
    return [label_distribution(r, labels) for r in results]
