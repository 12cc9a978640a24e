"""OpenAI's own Python client, and LiteLLM's embedding(), against /v1/embeddings of a real gateway (builtin:minilm).

The rules are unit tests (tests/unit/test_openai_embeddings.py) on the fake backend; here the clients' own request
building and decoding meet the real model's vectors.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator

import httpx
import numpy as np
import openai
import pytest

from tests.support.processes import ServerProcess

TEXTS = ["What is the integral of sin(x)?", "Write a haiku about autumn leaves."]


@pytest.fixture(scope="module")
def model_id(server: ServerProcess) -> str:
    served: str = httpx.get(f"{server.url}/v1/models", timeout=30).json()["data"][0]["id"]
    assert served == httpx.get(f"{server.url}/health", timeout=30).json()["model"]
    return served


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60) as c:
        yield c


def test_openai_client_float_and_base64_answer_the_same_unit_vectors(client: openai.OpenAI, model_id: str) -> None:
    as_float = client.embeddings.create(model=model_id, input=TEXTS, encoding_format="float")
    as_base64 = client.embeddings.create(model=model_id, input=TEXTS, encoding_format="base64")  # asked for: the strings
    by_default = client.embeddings.create(model=model_id, input=TEXTS)  # the client asks for base64 and decodes it itself
    assert as_float.model == model_id and [d.index for d in as_float.data] == [0, 1]
    floats = np.array([d.embedding for d in as_float.data], dtype=np.float32)
    decoded = np.array([np.frombuffer(base64.b64decode(str(d.embedding)), dtype="<f4") for d in as_base64.data])
    np.testing.assert_allclose(floats, decoded, rtol=0, atol=1e-6)  # two model calls; the encoding itself is exact (unit tests)
    np.testing.assert_allclose(floats, np.array([d.embedding for d in by_default.data], dtype=np.float32), rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(floats, axis=1), 1.0, rtol=1e-5)
    assert as_float.usage.prompt_tokens == as_float.usage.total_tokens > 0


def test_openai_client_single_string_and_query_kind(client: openai.OpenAI, model_id: str) -> None:
    document = client.embeddings.create(model=model_id, input=TEXTS[0])
    query = client.embeddings.create(model=model_id, input=TEXTS[0], extra_body={"input_type": "query"})
    assert len(document.data) == len(query.data) == 1
    similarity = float(np.dot(document.data[0].embedding, query.data[0].embedding))
    assert similarity > 0.5  # one text, with or without the model's query prompt (none for MiniLM): near or the same


def test_openai_client_raises_its_own_errors(client: openai.OpenAI, model_id: str) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="text-embedding-3-small", input="x")
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model=model_id, input="x", dimensions=8)
    assert refused.value.param == "dimensions"
    with pytest.raises(openai.BadRequestError) as tokens:
        client.embeddings.create(model=model_id, input=[[101, 2023, 102]])
    assert tokens.value.param == "input"


def test_litellm_embedding(server: ServerProcess, model_id: str, client: openai.OpenAI) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: litellm's bundled price map
    import litellm

    answer = litellm.embedding(
        model=f"openai/{model_id}", input=TEXTS, api_base=f"{server.url}/v1", api_key="unused", encoding_format="float"
    )
    vectors = np.array([item["embedding"] for item in answer.data], dtype=np.float32)
    expected = np.array(
        [d.embedding for d in client.embeddings.create(model=model_id, input=TEXTS, encoding_format="float").data], dtype=np.float32
    )
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
