"""Scoring maths (temperature fit, entropy) and the routing policy's rules."""

from __future__ import annotations

import math

import numpy as np

from mcp_classifier.classify.categories import CategoryConfig
from mcp_classifier.classify.routing import RoutingPolicy
from mcp_classifier.classify.scoring import entropy_nats, fit_temperature, softmax


def test_fit_temperature_recovers_the_temperature_that_generated_the_labels() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(0.0, 0.1, size=(4000, 5))
    true_t = 0.05
    probs = softmax(scores, true_t)
    labels = np.array([rng.choice(5, p=p) for p in probs])
    assert abs(fit_temperature(scores, labels) - true_t) / true_t < 0.15


def test_entropy_is_log_n_for_uniform_and_zero_for_certain() -> None:
    uniform = np.full((1, 5), 0.2)
    certain = np.array([[1.0, 0.0, 0.0, 0.0, 0.0]])
    assert math.isclose(entropy_nats(uniform)[0], math.log(5), rel_tol=1e-9)
    assert entropy_nats(certain)[0] < 1e-9


def _config(**policy: object) -> CategoryConfig:
    return CategoryConfig.model_validate(
        {
            "categories": [
                {"name": "math", "examples": ["1+1"], "model": "fast-math"},
                {"name": "science", "examples": ["atoms"], "use_reasoning": True},
            ],
            "policy": {
                "default_model": "default-model",
                "low_confidence": {"threshold": 0.6, "model": "strong-model", "use_reasoning": True},
                "complexity": {"long_query_words": 10, "reasoning_markers": ["prove", "step by step"]},
                **policy,
            },
        }
    )


def test_simple_confident_query_goes_to_the_category_model_without_reasoning() -> None:
    decision = RoutingPolicy(_config()).decide(0, 0.95, "what is 5 + 3")
    assert (decision.model, decision.use_reasoning) == ("fast-math", False)


def test_low_confidence_escalates_to_the_stronger_model_with_reasoning() -> None:
    decision = RoutingPolicy(_config()).decide(0, 0.4, "what is 5 + 3")
    assert (decision.model, decision.use_reasoning, decision.reason) == ("strong-model", True, "low_confidence")


def test_long_query_turns_reasoning_on() -> None:
    text = "please tell me what you think about this rather long question with many many words in it"
    decision = RoutingPolicy(_config()).decide(0, 0.95, text)
    assert decision.use_reasoning and decision.reason == "long_query"


def test_reasoning_marker_turns_reasoning_on_as_a_whole_word_only() -> None:
    policy = RoutingPolicy(_config())
    assert policy.decide(0, 0.95, "Prove that 2 is prime").use_reasoning
    assert policy.decide(0, 0.95, "solve it step by step").use_reasoning
    assert not policy.decide(0, 0.95, "improve my sum").use_reasoning  # "prove" inside "improve"


def test_category_default_reasoning_and_default_model_apply() -> None:
    decision = RoutingPolicy(_config()).decide(1, 0.95, "atoms")
    assert (decision.model, decision.use_reasoning) == ("default-model", True)
