"""Every classify answer says who decided it and whether the query was in scope, on every door.

In process, over the fake backend: REST style, JSON-RPC in both eras, WebSocket, classify_batch, and the
gRPC messages the replicas and the public gRPC door carry. A router that logs a misroute reads `_meta`
to tell which model, category set and policy made it; an old client still reads category and confidence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mcp_classifier.api.convert import results_from_proto, results_to_proto
from mcp_classifier.classify.results import ClassificationResult, Revision
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

STATELESS = "2026-07-28"
TEXT = "what is the integral of x squared"


@pytest.fixture(scope="module")
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(scope="module")
def client(backend: FakeBackend) -> Iterator[TestClient]:
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with TestClient(app) as http:
        yield http


def _expected_meta(backend: FakeBackend) -> dict[str, str]:
    return {
        "model_id": "fake-model",
        "category_set_version": backend.config.category_set_version,
        "policy_version": backend.config.policy_version,
    }


def _payload(result: dict[str, Any]) -> dict[str, Any]:
    """What the Semantic Router's client parses: the JSON in content[0].text (structuredContent must match it)."""
    parsed = json.loads(result["content"][0]["text"])
    assert parsed == result["structuredContent"]
    return parsed


def _assert_answer(answer: dict[str, Any], backend: FakeBackend) -> None:
    assert answer["_meta"] == _expected_meta(backend)
    assert answer["in_scope"] is True and answer["labels"] == [answer["category"]]
    assert 0.0 <= answer["margin"] <= 1.0
    assert answer["language"] == "en" and answer["language_served"] is True
    # The fields an old client reads are all still there.
    assert {"class", "category", "confidence", "model", "use_reasoning"} <= answer.keys()


def test_rest_style(client: TestClient, backend: FakeBackend) -> None:
    response = client.post("/mcp/tools/call", json={"name": "classify_text", "arguments": {"text": TEXT, "with_probabilities": True}})
    assert response.status_code == 200
    answer = _payload(response.json())
    _assert_answer(answer, backend)
    assert answer["entropy_bits"] == pytest.approx(answer["entropy"] / 0.6931471805599453)


@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_jsonrpc_in_both_eras(client: TestClient, backend: FakeBackend, era: str) -> None:
    params: dict[str, Any] = {"name": "classify_text", "arguments": {"text": TEXT}}
    headers = {}
    if era == "stateless":
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
        headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": "classify_text"}
    response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers)
    assert response.status_code == 200
    _assert_answer(_payload(response.json()["result"]), backend)


def test_websocket(client: TestClient, backend: FakeBackend) -> None:
    with client.websocket_connect("/ws") as socket:
        socket.send_text(
            json.dumps(
                {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "classify_text", "arguments": {"text": TEXT}}}
            )
        )
        _assert_answer(_payload(json.loads(socket.receive_text())["result"]), backend)


def test_classify_batch_items(client: TestClient, backend: FakeBackend) -> None:
    response = client.post("/mcp/tools/call", json={"name": "classify_batch", "arguments": {"texts": [TEXT, "hello there"]}})
    results = _payload(response.json())["results"]
    assert len(results) == 2
    for answer in results:
        _assert_answer(answer, backend)


def test_the_output_schema_requires_what_every_answer_carries(client: TestClient) -> None:
    tools = client.post("/mcp/tools/list", json={}).json()["tools"]
    schema = next(t for t in tools if t["name"] == "classify_text")["outputSchema"]
    assert {"in_scope", "labels", "margin", "language", "language_served", "_meta"} <= set(schema["required"])
    assert "bits" in schema["properties"]["entropy_bits"]["description"]
    assert "nats" in schema["properties"]["entropy"]["description"]


def test_grpc_messages_carry_scope_labels_and_revision() -> None:
    result = ClassificationResult(
        class_index=1,
        category="billing",
        confidence=0.12,
        model="small",
        use_reasoning=False,
        probabilities=(0.3, 0.6, 0.1),
        entropy=0.9,
        in_scope=False,
        labels=(),
        margin=0.3,
        revision=Revision("m", "c1", "p1"),
        language="es",
        language_served=False,
    )
    (back,) = results_from_proto(results_to_proto([result], with_probabilities=True))
    assert back == result
    # An answer from a replica that predates the scope and language fields reads as in scope and served.
    (old,) = results_from_proto(results_to_proto([ClassificationResult(0, "a", 0.9, "m", False, (0.9, 0.1), 0.3)], True))
    assert old.in_scope is True and old.language_served is True


def test_every_answer_is_counted_by_outcome_and_an_unserved_language_by_its_code(backend: FakeBackend) -> None:
    """What an operator graphs to see traffic the categories or the model miss (the counting wrapper the gateway uses)."""
    import asyncio
    from dataclasses import replace

    from mcp_classifier.backend.answer_counts import AnswerCounts
    from mcp_classifier.telemetry import GatewayMetrics

    class Spanish(FakeBackend):
        def answer(self, text: str) -> ClassificationResult:
            served = not text.startswith("¿")
            return replace(super().answer(text), in_scope=served, language="en" if served else "es", language_served=served)

    metrics = GatewayMetrics()
    counted = AnswerCounts(Spanish(), metrics)
    asyncio.run(counted.predict([TEXT, "¿Dónde está mi pedido?", "¿Puedo pagar con tarjeta?"]))
    page = metrics.render().decode()
    assert 'mcp_classifier_answers_total{classifier="default",outcome="in_scope"} 1.0' in page
    assert 'mcp_classifier_answers_total{classifier="default",outcome="unserved_language"} 2.0' in page
    assert 'mcp_classifier_unserved_language_answers_total{language="es"} 2.0' in page
