"""The OpenAI-compatible routes' message shapes as pydantic models, and what /openapi.json says of each route.

The handler reads the request by hand, to answer each fault in OpenAI's error shape with the field it is about
(``param``); these models say what goes over the wire, and the schemathesis fuzz checks the answers against them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from .openapi import schema_of

JSON = "application/json"


class EmbeddingsRequest(BaseModel):
    """OpenAI's embeddings request, plus ``input_type`` (query or document), as other embedding servers take it."""

    input: str | list[str] = Field(description="A text, or a list of texts (token-id arrays are refused).")
    model: str = Field(description="The served model: its id from GET /v1/models (or the model setting's name).")
    # null is the default for each optional field, as clients that send every field write it
    encoding_format: Literal["float", "base64"] | None = Field("float", description="base64: little-endian float32 bytes.")
    dimensions: int | None = Field(
        None, ge=1, description="Cut to this size and renormalise: only for a model that declares Matryoshka sizes."
    )
    input_type: Literal["query", "document"] | None = Field(
        "document", description="query: with the model's query instruction (Qwen3-Embedding); document: without."
    )
    user: str | None = Field(None, description="Accepted and ignored.")


class Embedding(BaseModel):
    object: Literal["embedding"]
    index: int
    embedding: list[float] | str


class EmbeddingsUsage(BaseModel):
    """Tokens of the inputs, as the model reads them (truncated at max_seq_length); an estimate, see docs/embeddings.md."""

    prompt_tokens: int
    total_tokens: int


class EmbeddingsAnswer(BaseModel):
    object: Literal["list"]
    data: list[Embedding]
    model: str
    usage: EmbeddingsUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelsAnswer(BaseModel):
    object: Literal["list"]
    data: list[ModelCard]


class OpenAiErrorObject(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAiErrorBody(BaseModel):
    """Every refusal of these routes, the edge's included: OpenAI's shape, which its clients raise from."""

    error: OpenAiErrorObject


_ERROR = schema_of(OpenAiErrorBody)


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _answers(ok: dict[str, Any], errors: dict[int, str]) -> dict[str, Any]:
    edge = {
        401: "Missing or unknown API key (when keys are configured).",
        403: "Origin or Host not allowed.",
        429: "Rate limit exceeded (Retry-After says when to come back).",
    }
    return {"200": ok, **{str(status): _json(text, _ERROR) for status, text in {**errors, **edge}.items()}}


EMBEDDINGS: dict[str, Any] = {
    "summary": "OpenAI-compatible embeddings, from the same model and backend as classification",
    "description": "input_type (query or document, default document) says whether the model's query instruction "
    "applies. Texts longer than max_seq_length tokens are truncated, as the model reads them.",
    "requestBody": {"required": True, "content": {JSON: {"schema": schema_of(EmbeddingsRequest)}}},
    "responses": _answers(
        _json("One embedding per input, in order.", schema_of(EmbeddingsAnswer)),
        {
            400: "Malformed body or bad field (param names it).",
            404: "The model is not the one served (model_not_found).",
            413: "Body over max_body_bytes.",
            500: "The backend failed.",
            503: "The model backend is unavailable or overloaded: retry on another replica or later.",
            504: "The model backend did not answer within the deadline.",
        },
    ),
}

MODELS: dict[str, Any] = {
    "summary": "OpenAI-compatible model list: the one model served",
    "responses": _answers(
        _json("The served model.", schema_of(ModelsAnswer)),
        {503: "The model backend is unavailable: what it serves is not known yet.", 504: "The backend did not answer in time."},
    ),
}
