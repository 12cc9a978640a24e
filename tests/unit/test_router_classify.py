"""POST /classify, the vLLM Semantic Router's remote classifier (docs/protocol.md): the router's rules replayed on the
door's answers, in process over the fake backend.

tests/integration/test_router_classify_real_model.py replays the same rules on the real model's answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcp_classifier.backend.base import BackendError, BackendTimeout, BackendUnavailable
from mcp_classifier.edge import build_edge_guard
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.route_labels import route_label
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.categories import write_default_with
from tests.support.fake_backend import TOP_PROBABILITY, FakeBackend
from tests.support.http_app import gateway_app
from tests.support.router_rules import check_answer, check_refusal

API_KEY = "router-key-5b7d"
QUERY = "What is the integral of sin(x)?"


def _client(backend: FakeBackend, **app_options: Any) -> Iterator[httpx.Client]:
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, **app_options)
    with asgi_client(app) as http:
        yield http


@pytest.fixture(scope="module")
def fallback_backend(tmp_path_factory: pytest.TempPathFactory) -> FakeBackend:
    return FakeBackend(write_default_with(tmp_path_factory.mktemp("fallback") / "categories.yaml", fallback_label="other"))


@pytest.fixture(scope="module")
def fallback_client(fallback_backend: FakeBackend) -> Iterator[httpx.Client]:
    yield from _client(fallback_backend)


@pytest.fixture(scope="module")
def multi_backend(tmp_path_factory: pytest.TempPathFactory) -> FakeBackend:
    path = tmp_path_factory.mktemp("multi") / "categories.yaml"
    return FakeBackend(write_default_with(path, detect_out_of_scope=True, multi_label=True, fallback_label="none_of_these"))


@pytest.fixture(scope="module")
def multi_client(multi_backend: FakeBackend) -> Iterator[httpx.Client]:
    yield from _client(multi_backend)


def classify(client: httpx.Client, body: Any = None, *, raw: bytes | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """As the router's HTTP client sends it: a JSON body, Content-Type: application/json."""
    content = raw if raw is not None else httpx.Request("POST", "/", json=body).read()
    return client.post("/classify", content=content, headers={"Content-Type": "application/json", **(headers or {})})


# ---- the default file: the categories' distribution ---------------------------------------------
def test_one_text_answers_the_distribution_over_every_category(client: httpx.Client, fake_backend: FakeBackend) -> None:
    response = classify(client, {"inputs": QUERY})
    (scores,) = check_answer(response, fake_backend.config.names)
    expected = fake_backend.answer(QUERY)
    assert [entry["label"] for entry in response.json()] == fake_backend.config.names  # class order
    assert [scores[name] for name in fake_backend.config.names] == list(expected.probabilities)


def test_the_headers_name_the_revision_that_decided_and_the_trace(client: httpx.Client, fake_backend: FakeBackend) -> None:
    response = classify(client, {"inputs": QUERY})
    config = fake_backend.config
    assert response.headers["X-Model"] == "fake-model"
    assert response.headers["X-Category-Set-Version"] == config.category_set_version
    assert response.headers["X-Policy-Version"] == config.policy_version
    assert response.headers["X-Trace-Id"]


def test_a_list_of_inputs_answers_one_distribution_each_in_one_backend_call(client: httpx.Client, fake_backend: FakeBackend) -> None:
    texts = [QUERY, "Who signed the Treaty of Versailles?", "how do I reverse a linked list", QUERY]
    before = len(fake_backend.calls)
    answers = check_answer(classify(client, {"inputs": texts}), fake_backend.config.names, inputs=len(texts))
    assert fake_backend.calls[before:] == [texts]
    for text, scores in zip(texts, answers):
        assert list(scores.values()) == list(fake_backend.answer(text).probabilities)
    assert answers[0] == answers[3]


def test_other_keys_beside_inputs_are_ignored(client: httpx.Client, fake_backend: FakeBackend) -> None:
    check_answer(classify(client, {"inputs": QUERY, "parameters": {"top_k": None}}), fake_backend.config.names)


# ---- fallback_label: the share of queries that fit no category ------------------------------------
@pytest.mark.parametrize("scope", [1.0, 0.8, 0.3, 0.0])
def test_the_fallback_label_carries_the_out_of_scope_share_and_the_sum_stays_one(
    fallback_client: httpx.Client, fallback_backend: FakeBackend, scope: float
) -> None:
    fallback_backend.scope_probability = scope
    try:
        response = classify(fallback_client, {"inputs": QUERY})
    finally:
        fallback_backend.scope_probability = 1.0
    names = fallback_backend.config.names
    (scores,) = check_answer(response, [*names, "other"])
    assert [entry["label"] for entry in response.json()][-1] == "other"
    assert scores["other"] == pytest.approx(1.0 - scope)
    expected = fallback_backend.answer(QUERY).probabilities
    assert [scores[n] for n in names] == pytest.approx([p * scope for p in expected])
    assert max(scores[n] for n in names) == pytest.approx(TOP_PROBABILITY * scope)


# ---- multi_label: independent scores ----------------------------------------------------------------
def test_multi_label_answers_each_label_its_own_score(multi_client: httpx.Client, multi_backend: FakeBackend) -> None:
    multi_backend.scope_probability = 0.7
    try:
        response = classify(multi_client, {"inputs": [QUERY, "hello there"]})
        expected = [multi_backend.answer(QUERY), multi_backend.answer("hello there")]
    finally:
        multi_backend.scope_probability = 1.0
    names = multi_backend.config.names
    answers = check_answer(response, [*names, "none_of_these"], inputs=2, multi_label=True)
    for scores, result in zip(answers, expected):
        assert [scores[n] for n in names] == pytest.approx(list(result.label_scores))
        assert scores["none_of_these"] == pytest.approx(0.3)
        assert sum(scores.values()) != pytest.approx(1.0)  # independent: nothing makes them sum to one


# ---- refusals: short JSON, the table's status, never the input ---------------------------------------
SECRET = "zq-private-marker-3141"
BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("missing inputs", {"text": SECRET}, 400, "'inputs' is missing"),
    ("inputs a number", {"inputs": 42}, 400, "must be a string or a list of strings, not a number"),
    ("inputs an object", {"inputs": {"text": SECRET}}, 400, "not an object"),
    ("inputs null", {"inputs": None}, 400, "not null"),
    ("empty text", {"inputs": ""}, 400, "is empty"),
    ("blank text", {"inputs": "  \n\t "}, 400, "is empty"),
    ("text too long", {"inputs": SECRET + "x" * 8192}, 400, "longer than 8192 characters"),
    ("empty list", {"inputs": []}, 400, "empty list"),
    ("an item not a string", {"inputs": [QUERY, 7]}, 400, "item 2 is a number"),
    ("an item blank", {"inputs": [QUERY, " "]}, 400, "item 2 is empty"),
    ("an item too long", {"inputs": [QUERY, SECRET * 400]}, 400, "item 2 is longer than"),
    ("too many items", {"inputs": [SECRET] * 257}, 400, "257 items: at most 256"),
    ("body a list", [SECRET], 400, "must be a JSON object"),
]


@pytest.mark.parametrize(("body", "status", "says"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES])
def test_bad_input_is_refused_short_without_echoing_it(client: httpx.Client, body: Any, status: int, says: str) -> None:
    assert says in check_refusal(classify(client, body), status, sent=SECRET)


def test_a_body_that_is_not_json_or_too_large_is_refused(client: httpx.Client) -> None:
    check_refusal(classify(client, raw=b'{"inputs": "' + SECRET.encode() + b"..."), 400, sent=SECRET)
    huge = {"inputs": [SECRET * 100] * 600}  # over the 1 MiB body limit before any text rule
    assert "exceeds" in check_refusal(classify(client, huge), 413, sent=SECRET)


@pytest.mark.parametrize(("failure", "status"), [(BackendUnavailable("replicas down"), 503), (BackendTimeout("deadline"), 504)])
def test_a_backend_failure_answers_the_tables_status(
    client: httpx.Client, fake_backend: FakeBackend, failure: BackendError, status: int
) -> None:
    fake_backend.fail_with = failure
    try:
        response = classify(client, {"inputs": SECRET})
    finally:
        fake_backend.fail_with = None
    check_refusal(response, status, sent=SECRET)
    assert response.json()["data"]["eventId"]


# ---- the edge: keys, and the door's own metrics label -------------------------------------------------
def test_with_keys_configured_the_router_sends_its_key_as_bearer() -> None:
    settings = Settings(api_keys=API_KEY, host="127.0.0.1")
    metrics = GatewayMetrics()
    guard = build_edge_guard(settings.edge, metrics, host=settings.serving.host, link=None, redis_metrics=None, route_label=route_label)
    backend = FakeBackend()
    for client in _client(backend, metrics=metrics, edge=guard):
        check_refusal(classify(client, {"inputs": SECRET}), 401, sent=SECRET)
        check_refusal(classify(client, {"inputs": SECRET}, headers={"Authorization": "Bearer wrong-key"}), 401, sent=SECRET)
        check_answer(classify(client, {"inputs": QUERY}, headers={"Authorization": f"Bearer {API_KEY}"}), backend.config.names)
        assert client.get("/health").status_code == 200  # probes stay open


def test_the_door_has_its_own_metrics_labels() -> None:
    metrics = GatewayMetrics()
    for client in _client(FakeBackend(), metrics=metrics):
        classify(client, {"inputs": QUERY})
        classify(client, {"inputs": ""})
        text = client.get("/metrics").text
    assert 'mcp_classifier_door_requests_total{door="classify"} 2.0' in text
    assert 'mcp_classifier_door_errors_total{door="classify",kind="invalid_params"} 1.0' in text
    assert 'mcp_classifier_requests_total{route="/classify",status="200"} 1.0' in text
