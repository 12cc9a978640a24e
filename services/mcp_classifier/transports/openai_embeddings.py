"""OpenAI-compatible ``POST /v1/embeddings`` and ``GET /v1/models`` over the classification backend's ``embed``.

The vectors come from the same model, on the same path, as classification (in process, embedded Ray or a Ray
cluster), so a router that needs embeddings beside the classifier runs no second model server. What the routes
accept and answer, and every choice below, is in docs/embeddings.md.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response

from ..backend.base import BackendError, BackendTimeout, ClassificationBackend, EmbeddingKind
from ..classify.results import ClassifierInfo
from ..engine.matryoshka import Matryoshka, known_matryoshka
from ..protocol import correlation
from ..protocol.excerpts import excerpt
from ..protocol.openai_errors import SERVER_ERROR, OpenAiError
from ..telemetry import GatewayMetrics
from . import openai_models
from .bodies import BodyTooLarge, json_response, read_body

EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"
OPENAI_PATHS = frozenset({EMBEDDINGS_PATH, MODELS_PATH})
OWNED_BY = "mcp-classifier"
CHARS_PER_TOKEN = 4  # the usage estimate: about four characters a token for English text with BPE/WordPiece vocabularies
INPUT_TYPES: dict[str, EmbeddingKind] = {"query": "query", "document": "document"}


@dataclass(frozen=True)
class EmbeddingsOptions:
    """What the routes are given beside the backend: the model setting's name (accepted as ``model`` beside the
    served id), the most inputs a call takes, the tokens kept per input, the model's Matryoshka sizes where its
    files declare them (else the known-models table decides by the served id), and the ``created`` time."""

    model_name: str = ""
    max_inputs: int = 256
    max_seq_length: int = 256
    matryoshka: Matryoshka | None = None
    created: int = field(default_factory=lambda: int(time.time()))


@dataclass(frozen=True)
class EmbeddingsAsk:
    """A request read and checked: the texts, the model named, and how to answer."""

    texts: list[str]
    model: str
    kind: EmbeddingKind
    base64: bool
    dimensions: int | None


def add_openai_routes(
    app: FastAPI, backend: ClassificationBackend, options: EmbeddingsOptions, max_body_bytes: int, metrics: GatewayMetrics
) -> None:
    """POST /v1/embeddings and GET /v1/models, answering every refusal in OpenAI's error shape."""

    @app.post(EMBEDDINGS_PATH, openapi_extra=openai_models.EMBEDDINGS)
    async def embeddings(request: Request) -> Response:
        correlation.note(era="openai", method="embeddings")
        return await _observed(EMBEDDINGS_PATH, metrics, _embeddings(request, backend, options, max_body_bytes))

    @app.get(MODELS_PATH, openapi_extra=openai_models.MODELS)
    async def models() -> Response:
        correlation.note(era="openai", method="models")
        return await _observed(MODELS_PATH, metrics, _models(backend, options))


async def _observed(path: str, metrics: GatewayMetrics, answer: Awaitable[Response]) -> Response:
    """Await ``answer``; an OpenAiError becomes its body, and either way the route's metrics are written."""
    return await metrics.observed(path, _answered(answer, metrics))


async def _answered(answer: Awaitable[Response], metrics: GatewayMetrics) -> Response:
    """``answer``, or the body of the OpenAiError it raised."""
    try:
        return await answer
    except OpenAiError as exc:
        metrics.errors.labels(exc.code or exc.type).inc()
        return json_response(exc.body(), exc.status)


async def _models(backend: ClassificationBackend, options: EmbeddingsOptions) -> Response:
    info = await _served(backend)
    card = {"id": info.model_id, "object": "model", "created": options.created, "owned_by": OWNED_BY}
    return json_response({"object": "list", "data": [card]})


async def _embeddings(request: Request, backend: ClassificationBackend, options: EmbeddingsOptions, max_body_bytes: int) -> Response:
    ask = parse_request(await _readjson_response(request, max_body_bytes), options.max_inputs)
    info = await _served(backend)
    if ask.model not in {info.model_id, options.model_name}:
        raise OpenAiError(
            404,
            f"the model {excerpt(ask.model)} is not served here; this service serves {info.model_id}",
            param="model",
            code="model_not_found",
        )
    try:
        vectors = await backend.embed(ask.texts, ask.kind)
    except BackendError as exc:
        raise backend_refusal(exc) from None
    if ask.dimensions is not None:
        vectors = cut_to(vectors, ask.dimensions, options.matryoshka or known_matryoshka(info.model_id), info.model_id)
    tokens = sum(estimated_tokens(text, options.max_seq_length) for text in ask.texts)
    return json_response(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": _encoded(row, ask.base64)} for i, row in enumerate(vectors)],
            "model": info.model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


async def _readjson_response(request: Request, max_body_bytes: int) -> Any:
    try:
        raw = await read_body(request, max_body_bytes)
    except BodyTooLarge:
        raise OpenAiError(413, f"request body exceeds {max_body_bytes} bytes", code="request_too_large") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise OpenAiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None


async def _served(backend: ClassificationBackend) -> ClassifierInfo:
    """What the backend serves (its model id), or the refusal for why it cannot say."""
    try:
        return (await backend.health(need_info=True)).require_info()
    except BackendError as exc:
        raise backend_refusal(exc) from None


def backend_refusal(exc: BackendError) -> OpenAiError:
    """A backend failure as OpenAI's server_error: 504 for a timeout, 500 for an internal fault, else 503 (retry)."""
    status = 504 if isinstance(exc, BackendTimeout) else 500 if exc.kind == "internal" else 503
    return OpenAiError(status, f"the model backend failed: {exc}", type=SERVER_ERROR, code=f"backend_{exc.kind}")


def parse_request(body: Any, max_inputs: int) -> EmbeddingsAsk:
    """The checked request, or the OpenAiError naming the field at fault. Unknown fields are ignored, as ``user`` is."""
    if not isinstance(body, dict):
        raise OpenAiError(400, "the request body must be a JSON object", code="invalid_body")
    texts = parse_input(body.get("input"), max_inputs)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise OpenAiError(400, "model is required: the served model's id, from GET /v1/models", param="model", code="invalid_model")
    encoding = _one_of(body, "encoding_format", ("float", "base64"), "float")
    input_type = _one_of(body, "input_type", tuple(INPUT_TYPES), "document")
    if not isinstance(body.get("user", ""), str | None):
        raise OpenAiError(400, "user must be a string", param="user", code="invalid_user")
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1):
        raise OpenAiError(400, "dimensions must be a positive integer", param="dimensions", code="invalid_dimensions")
    return EmbeddingsAsk(texts, model, INPUT_TYPES[input_type], encoding == "base64", dimensions)


def _one_of(body: dict[str, Any], field: str, allowed: tuple[str, ...], default: str) -> str:
    """A string field with a fixed set of values: missing or null is the default; anything else (another type
    included: a list or an object is no value of it) is refused naming the field."""
    value = body.get(field)
    if value is None:
        return default
    if not isinstance(value, str) or value not in allowed:
        choices = " or ".join(f'"{choice}"' for choice in allowed)
        raise OpenAiError(400, f"{field} must be {choices}", param=field, code=f"invalid_{field}")
    return value


def parse_input(value: Any, max_inputs: int) -> list[str]:
    """``input`` as a list of non-empty texts: a string, or a list of strings. Token-id arrays are refused: the
    service embeds text, tokenising it with the model's own tokenizer."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise OpenAiError(400, "input is required: a string or a list of strings", param="input", code="invalid_input")
    if not value:
        raise OpenAiError(400, "input must not be an empty list", param="input", code="invalid_input")
    if all(isinstance(item, int) and not isinstance(item, bool) for item in value) or any(isinstance(item, list) for item in value):
        raise OpenAiError(400, "token-id arrays are not accepted as input: send the texts", param="input", code="unsupported_input")
    if len(value) > max_inputs:
        raise OpenAiError(400, f"input has {len(value)} texts; at most {max_inputs} per call", param="input", code="too_many_inputs")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise OpenAiError(400, f"input[{i}] is not a string", param="input", code="invalid_input")
        if not item:
            raise OpenAiError(400, f"input[{i}] is an empty string", param="input", code="invalid_input")
    return value


def cut_to(vectors: np.ndarray, dimensions: int, matryoshka: Matryoshka | None, model_id: str) -> np.ndarray:
    """The leading ``dimensions`` values of each vector, renormalised to unit length: only where the model was
    trained for it (Matryoshka); the full size is always allowed and returned as it is."""
    full = int(vectors.shape[1])
    if dimensions == full:
        return vectors
    if matryoshka is None:
        raise OpenAiError(
            400,
            f"dimensions {dimensions}: the model {model_id} declares no Matryoshka sizes, so it gives its full size ({full}) only",
            param="dimensions",
            code="unsupported_dimensions",
        )
    if not matryoshka.allows(dimensions, full):
        raise OpenAiError(
            400,
            f"dimensions {dimensions}: the model {model_id} gives {matryoshka.describe(full)}",
            param="dimensions",
            code="invalid_dimensions",
        )
    cut = np.ascontiguousarray(vectors[:, :dimensions], dtype=np.float32)
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    return cut / np.where(norms > 0, norms, np.float32(1.0))


def estimated_tokens(text: str, max_seq_length: int) -> int:
    """The tokens the model reads of ``text``, estimated (the model, and its tokenizer, may be on another host):
    about one per CHARS_PER_TOKEN characters, plus the two special tokens, and never more than max_seq_length."""
    return min(max_seq_length, math.ceil(len(text) / CHARS_PER_TOKEN) + 2)


def _encoded(row: np.ndarray, as_base64: bool) -> Any:
    """A vector as OpenAI sends it: a list of floats, or the base64 of its little-endian float32 bytes."""
    if as_base64:
        return base64.b64encode(np.asarray(row, dtype="<f4").tobytes()).decode("ascii")
    return np.ascontiguousarray(row, dtype=np.float32)  # orjson writes each float32 in its shortest exact form
