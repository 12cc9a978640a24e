"""OpenAI-compatible POST /v1/embeddings and GET /v1/models (docs/embeddings.md): every rule, in process over the fake backend.

tests/e2e/test_openai_clients.py runs OpenAI's own client, and LiteLLM's, against a real gateway with the real model.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from mcp_classifier.backend.base import BackendError, BackendTimeout, BackendUnavailable
from mcp_classifier.edge import EdgeGuard
from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.edge.origins import Allowlist
from mcp_classifier.edge.ratelimit import Decision
from mcp_classifier.engine.matryoshka import Matryoshka, declared_matryoshka, known_matryoshka, matryoshka_of
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.openai_embeddings import EmbeddingsOptions, estimated_tokens
from mcp_classifier.wiring import build_dispatcher, build_embeddings_options
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import EMBEDDING_DIMENSIONS, FakeBackend, bag_of_words_vector
from tests.support.http_app import gateway_app

MODEL = "fake-model"
SETTINGS_NAME = "builtin:minilm"
MAX_INPUTS = 4
MAX_SEQ = 16
MAX_BODY = 4096
KEY = "embeddings-key"


def open_app(
    backend: FakeBackend, options: EmbeddingsOptions, *, edge: EdgeGuard | None = None, metrics: GatewayMetrics | None = None
) -> Any:
    return gateway_app(
        build_dispatcher(Settings(), backend), backend, max_body_bytes=MAX_BODY, embeddings=options, edge=edge, metrics=metrics
    )


@pytest.fixture(scope="module")
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(scope="module")
def metrics() -> GatewayMetrics:
    return GatewayMetrics()


@pytest.fixture(scope="module")
def client(backend: FakeBackend, metrics: GatewayMetrics) -> Iterator[httpx.Client]:
    options = EmbeddingsOptions(model_name=SETTINGS_NAME, max_inputs=MAX_INPUTS, max_seq_length=MAX_SEQ, created=1_700_000_000)
    with asgi_client(open_app(backend, options, metrics=metrics)) as http:
        yield http


def embed(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/v1/embeddings", json={"model": MODEL, **body})


def assert_openai_error(response: httpx.Response, status: int, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: {"error": {message, type, param, code}} and nothing else, with the status."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"] and "Traceback" not in error["message"]
    assert error["type"] == ("invalid_request_error" if status < 500 and status not in (403, 429) else error["type"])
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code, error
    assert response.headers["x-trace-id"]
    return error


def vectors_of(body: dict[str, Any]) -> np.ndarray:
    return np.array([item["embedding"] for item in body["data"]], dtype=np.float32)


# ---- answers ------------------------------------------------------------------------------------
def test_a_string_input_answers_one_float_embedding_in_openai_shape(client: httpx.Client) -> None:
    response = embed(client, input="integrate sin x")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"object", "data", "model", "usage"}
    assert body["object"] == "list" and body["model"] == MODEL
    [item] = body["data"]
    assert item["object"] == "embedding" and item["index"] == 0
    assert len(item["embedding"]) == EMBEDDING_DIMENSIONS
    np.testing.assert_array_equal(np.float32(item["embedding"]), bag_of_words_vector("integrate sin x"))
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0


def test_a_list_input_answers_in_order_with_indexes(client: httpx.Client) -> None:
    texts = ["one fish", "two fish", "red fish"]
    body = embed(client, input=texts).json()
    assert [item["index"] for item in body["data"]] == [0, 1, 2]
    np.testing.assert_array_equal(vectors_of(body), np.vstack([bag_of_words_vector(t) for t in texts]))


def test_base64_decodes_to_the_float_answer_exactly(client: httpx.Client) -> None:
    texts = ["cosine of an angle", "a poem about rain"]
    floats = vectors_of(embed(client, input=texts).json())
    encoded = embed(client, input=texts, encoding_format="base64").json()
    for row, item in zip(floats, encoded["data"], strict=True):
        assert isinstance(item["embedding"], str)
        decoded = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        np.testing.assert_array_equal(decoded, row)


def test_the_settings_model_name_is_accepted_and_the_served_id_answered(client: httpx.Client) -> None:
    body = client.post("/v1/embeddings", json={"model": SETTINGS_NAME, "input": "x"}).json()
    assert body["model"] == MODEL


def test_user_and_unknown_fields_are_accepted_and_ignored(client: httpx.Client) -> None:
    assert embed(client, input="x", user="someone", extra_body_field=1).status_code == 200


def test_null_optional_fields_take_their_defaults(client: httpx.Client) -> None:
    body = embed(client, input="x", encoding_format=None, dimensions=None, input_type=None, user=None).json()
    assert isinstance(body["data"][0]["embedding"], list)


def test_a_user_that_is_no_string_is_400(client: httpx.Client) -> None:
    assert_openai_error(embed(client, input="x", user=5), 400, param="user")


def test_input_type_maps_to_the_backends_embedding_kind(client: httpx.Client, backend: FakeBackend) -> None:
    for sent, kind in (({}, "document"), ({"input_type": "document"}, "document"), ({"input_type": "query"}, "query")):
        backend.embed_calls.clear()
        assert embed(client, input="which kind", **sent).status_code == 200
        assert backend.embed_calls == [(kind, ["which kind"])], sent


def test_usage_counts_tokens_truncated_at_max_seq_length(client: httpx.Client) -> None:
    long_text = "word " * 200
    body = embed(client, input=["hi", long_text]).json()
    assert body["usage"]["prompt_tokens"] == estimated_tokens("hi", MAX_SEQ) + MAX_SEQ
    assert estimated_tokens(long_text, MAX_SEQ) == MAX_SEQ


def test_models_lists_the_served_model(client: httpx.Client) -> None:
    response = client.get("/v1/models")
    assert response.status_code == 200
    assert response.json() == {
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "created": 1_700_000_000, "owned_by": "mcp-classifier"}],
    }


def test_requests_are_counted_under_their_route_and_the_openai_door(client: httpx.Client, metrics: GatewayMetrics) -> None:
    embed(client, input="counted")
    client.get("/v1/models")
    text = metrics.render().decode()
    assert 'mcp_classifier_requests_total{route="/v1/embeddings",status="200"}' in text
    assert 'mcp_classifier_requests_total{route="/v1/models",status="200"}' in text
    assert 'door="openai"' in text


# ---- dimensions -------------------------------------------------------------------------------------
def test_the_full_size_is_always_accepted(client: httpx.Client) -> None:
    body = embed(client, input="x y", dimensions=EMBEDDING_DIMENSIONS).json()
    assert len(body["data"][0]["embedding"]) == EMBEDDING_DIMENSIONS


@pytest.mark.parametrize("dimensions", [64, EMBEDDING_DIMENSIONS + 1])
def test_other_dimensions_are_refused_where_the_model_declares_no_matryoshka_sizes(client: httpx.Client, dimensions: int) -> None:
    error = assert_openai_error(embed(client, input="x", dimensions=dimensions), 400, param="dimensions", code="unsupported_dimensions")
    assert "Matryoshka" in error["message"]


@pytest.mark.parametrize("dimensions", [0, -3, "64", 1.5, True])
def test_dimensions_must_be_a_positive_integer(client: httpx.Client, dimensions: Any) -> None:
    assert_openai_error(embed(client, input="x", dimensions=dimensions), 400, param="dimensions", code="invalid_dimensions")


def test_a_matryoshka_model_is_cut_and_renormalised_to_a_declared_size() -> None:
    backend = FakeBackend()
    options = EmbeddingsOptions(matryoshka=Matryoshka(sizes=(32, 64)))
    with asgi_client(open_app(backend, options)) as http:
        text = "alpha beta gamma delta epsilon zeta eta theta"
        for encoding in ("float", "base64"):
            body = embed(http, input=text, dimensions=64, encoding_format=encoding).json()
            got = body["data"][0]["embedding"]
            vector = np.frombuffer(base64.b64decode(got), dtype="<f4") if encoding == "base64" else np.float32(got)
            full = bag_of_words_vector(text)[:64]
            np.testing.assert_allclose(vector, full / np.linalg.norm(full), rtol=1e-6)
            assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        error = assert_openai_error(embed(http, input=text, dimensions=48), 400, param="dimensions", code="invalid_dimensions")
        assert "32, 64, 256" in error["message"]


def test_a_model_with_a_minimum_takes_any_size_from_it_to_the_full_one() -> None:
    backend = FakeBackend()
    with asgi_client(open_app(backend, EmbeddingsOptions(matryoshka=Matryoshka(minimum=32)))) as http:
        assert len(embed(http, input="a b", dimensions=100).json()["data"][0]["embedding"]) == 100
        assert_openai_error(embed(http, input="a b", dimensions=16), 400, param="dimensions", code="invalid_dimensions")
        assert_openai_error(embed(http, input="a b", dimensions=EMBEDDING_DIMENSIONS + 1), 400, param="dimensions")


def test_matryoshka_declarations_known_models_and_config_files(tmp_path: Any) -> None:
    assert known_matryoshka("Qwen/Qwen3-Embedding-0.6B") == Matryoshka(minimum=32)
    assert known_matryoshka("/models/qwen3-embedding-8b/") == Matryoshka(minimum=32)
    assert known_matryoshka("random:qwen3-embedding-0.6b") == Matryoshka(minimum=32)
    assert known_matryoshka("sentence-transformers/all-MiniLM-L6-v2") is None
    assert declared_matryoshka(tmp_path) is None
    (tmp_path / "config_sentence_transformers.json").write_text('{"matryoshka_dimensions": [256, 64, 128]}')
    assert declared_matryoshka(tmp_path) == Matryoshka(sizes=(64, 128, 256))
    assert matryoshka_of("Qwen/Qwen3-Embedding-0.6B", tmp_path) == Matryoshka(sizes=(64, 128, 256))  # the files win
    (tmp_path / "config_sentence_transformers.json").write_text('{"matryoshka_dimensions": "all"}')
    assert matryoshka_of("some/model", tmp_path) is None


def test_wiring_reads_a_model_directorys_declaration(tmp_path: Any) -> None:
    (tmp_path / "config.json").write_text('{"matryoshka_dimensions": [128]}')
    options = build_embeddings_options(Settings(model=str(tmp_path), max_batch_texts=7, max_seq_length=99))
    assert (options.model_name, options.max_inputs, options.max_seq_length) == (str(tmp_path), 7, 99)
    assert options.matryoshka == Matryoshka(sizes=(128,))
    assert build_embeddings_options(Settings()).matryoshka is None


# ---- refusals, in OpenAI's shape --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "code"),
    [
        ([1, 2, 3], "unsupported_input"),
        ([[1, 2], [3]], "unsupported_input"),
        (["text", [1, 2]], "unsupported_input"),
        ([], "invalid_input"),
        ("", "invalid_input"),
        (["ok", ""], "invalid_input"),
        (["ok", 3], "invalid_input"),
        ({"text": "x"}, "invalid_input"),
        (None, "invalid_input"),
        (["a"] * (MAX_INPUTS + 1), "too_many_inputs"),
    ],
)
def test_bad_input_is_400_on_param_input(client: httpx.Client, value: Any, code: str) -> None:
    assert_openai_error(embed(client, input=value), 400, param="input", code=code)


def test_token_id_arrays_are_refused_with_a_clear_message(client: httpx.Client) -> None:
    error = assert_openai_error(embed(client, input=[101, 2023]), 400, param="input", code="unsupported_input")
    assert "token-id arrays" in error["message"]


def test_the_most_inputs_per_call_are_accepted(client: httpx.Client) -> None:
    assert len(embed(client, input=["a"] * MAX_INPUTS).json()["data"]) == MAX_INPUTS


def test_an_unknown_model_is_404_model_not_found(client: httpx.Client) -> None:
    error = assert_openai_error(embed(client, input="x", model="text-embedding-3-small"), 404, param="model", code="model_not_found")
    assert MODEL in error["message"]


def test_a_missing_model_is_400(client: httpx.Client) -> None:
    assert_openai_error(client.post("/v1/embeddings", json={"input": "x"}), 400, param="model")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("encoding_format", "int8"),
        ("input_type", "passage"),
        ("input_type", [None]),  # a list is no value of a string field (it once raised a TypeError: a 500)
        ("encoding_format", {"a": 1}),
        ("encoding_format", False),
        ("input_type", ""),
    ],
)
def test_unknown_enum_values_are_400_on_their_param(client: httpx.Client, field: str, value: Any) -> None:
    assert_openai_error(embed(client, input="x", **{field: value}), 400, param=field)


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b""])
def test_a_body_that_is_no_json_object_is_400(client: httpx.Client, content: bytes) -> None:
    response = client.post("/v1/embeddings", content=content, headers={"Content-Type": "application/json"})
    assert_openai_error(response, 400)


def test_an_oversized_body_is_413(client: httpx.Client) -> None:
    assert_openai_error(embed(client, input="x" * (MAX_BODY + 10)), 413, code="request_too_large")


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (BackendUnavailable("down"), 503, "backend_unavailable"),
        (BackendTimeout("slow"), 504, "backend_timeout"),
        (BackendError("bug"), 500, "backend_internal"),
    ],
)
def test_backend_failures_are_server_errors(failure: BackendError, status: int, code: str) -> None:
    backend = FakeBackend()
    backend.fail_with = failure
    with asgi_client(open_app(backend, EmbeddingsOptions())) as http:
        error = assert_openai_error(embed(http, input="x"), status, code=code)
        assert error["type"] == "server_error"


def test_the_edges_refusals_answer_in_openais_shape() -> None:
    class Refusing:
        limit, window_ms = 1, 1000

        async def hit(self, identity: str) -> Decision:
            return Decision(False, 1, 7)

    metrics = GatewayMetrics()
    keyed = EdgeGuard(keys=ApiKeys(KEY, None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=None, metrics=metrics)
    with asgi_client(open_app(FakeBackend(), EmbeddingsOptions(), edge=keyed, metrics=metrics)) as http:
        for path in ("/v1/embeddings", "/v1/models"):
            response = http.request("POST" if path.endswith("embeddings") else "GET", path, json={"model": MODEL, "input": "x"})
            assert_openai_error(response, 401, code="invalid_api_key")
            bad = http.get(path, headers={"Authorization": "Bearer wrong"}) if path.endswith("models") else None
            if bad is not None:
                assert_openai_error(bad, 401, code="invalid_api_key")
        assert (
            http.post("/v1/embeddings", json={"model": MODEL, "input": "x"}, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        )
        assert isinstance(http.post("/mcp/ping", json={}).json()["error"], str)  # other routes keep the service's shape
    limited = EdgeGuard(keys=ApiKeys(None, None), hosts=Allowlist("*"), origins=Allowlist("localhost"), limiter=Refusing(), metrics=metrics)  # type: ignore[arg-type]
    with asgi_client(open_app(FakeBackend(), EmbeddingsOptions(), edge=limited, metrics=metrics)) as http:
        response = embed(http, input="x")
        error = assert_openai_error(response, 429, code="rate_limit_exceeded")
        assert error["type"] == "rate_limit_error" and response.headers["retry-after"] == "7"


def test_the_default_app_serves_the_routes() -> None:
    backend = FakeBackend()
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with asgi_client(app) as http:
        assert http.get("/v1/models").json()["data"][0]["id"] == MODEL
