"""POST /classify with the real model (builtin:minilm): the vLLM Semantic Router's rules (tests/support/router_rules.py)
hold on real answers for the packaged default file, a file with a fallback label and a multi-label file.

The door's own rules (refusals, headers, keys) are unit tests on the fake backend (tests/unit/test_router_classify.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcp_classifier.api.convert import results_from_proto, results_to_proto
from mcp_classifier.classify.categories import load_categories
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier, build_dispatcher, build_local_backend
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.categories import write_default_with
from tests.support.http_app import gateway_app
from tests.support.router_rules import check_answer

MATH = "What is the integral of sin(x) from 0 to pi?"
QUERIES = [
    MATH,
    "Who signed the Treaty of Versailles?",
    "write me a haiku about autumn leaves",  # off-topic for these categories
    "¿Cuál es la capital de Australia y por qué no es Sídney?",  # a language the model does not read
    "ok",
]
FILES = {
    "default": {},
    "fallback_label": {"fallback_label": "other", "detect_out_of_scope": True},
    "multi_label": {"fallback_label": "other", "detect_out_of_scope": True, "multi_label": True},
}


@pytest.fixture(scope="module", params=list(FILES))
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path | None]]:
    """The gateway app over the real model in process, serving one of FILES."""
    changes = FILES[request.param]
    path = write_default_with(tmp_path_factory.mktemp(request.param) / "categories.yaml", **changes) if changes else None
    settings = Settings(model="builtin:minilm", backend="local", categories_file=path)
    backend = build_local_backend(settings)
    app = gateway_app(build_dispatcher(settings, backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with asgi_client(app) as client:
        assert client.get("/ready").status_code == 200
        yield client, path


def test_the_answers_pass_the_routers_rules(served: tuple[httpx.Client, Path | None]) -> None:
    client, path = served
    config = load_categories(path)
    labels = [*config.names, *([config.fallback_label] if config.fallback_label else [])]
    one = client.post("/classify", json={"inputs": MATH})
    (scores,) = check_answer(one, labels, multi_label=config.multi_label)
    assert max(config.names, key=scores.__getitem__) == "math"
    assert one.headers["X-Model"] and one.headers["X-Category-Set-Version"] == config.category_set_version
    assert one.headers["X-Policy-Version"] == config.policy_version
    many = check_answer(client.post("/classify", json={"inputs": QUERIES}), labels, inputs=len(QUERIES), multi_label=config.multi_label)
    assert many[0] == pytest.approx(scores, abs=1e-3)  # batched with others: padding moves the last digits
    if config.fallback_label:  # the unserved language's answer goes mostly to the fallback label
        assert many[3]["other"] > 0.5 > many[0]["other"], many


def test_multi_label_scores_cross_the_replicas_grpc_messages(tmp_path: Path) -> None:
    """The Ray path: label_scores travel in the replica's Classification message."""
    path = write_default_with(tmp_path / "categories.yaml", **FILES["multi_label"])
    classifier = build_classifier(Settings(model="builtin:minilm", categories_file=path))
    results = classifier.classify(QUERIES)
    assert all(len(r.label_scores) == len(classifier.config.names) for r in results)
    assert all(0.0 <= s <= 1.0 for r in results for s in r.label_scores)
    math_scores = dict(zip(classifier.config.names, results[0].label_scores))
    assert max(math_scores, key=math_scores.__getitem__) == "math" and math_scores["math"] > 0.5
    assert max(results[3].label_scores) < 0.5  # the unserved language: no label is likely
    assert results_from_proto(results_to_proto(results, with_probabilities=True)) == results
