"""The HTTP doors' message shapes as pydantic models, from which /openapi.json writes their schemas.

The handlers build these bodies by hand for speed and read JSON-RPC by hand for its own error codes
(protocol/jsonrpc.py); the models say what goes over the wire, and the schemathesis fuzz
(tests/integration/test_fuzz_openapi.py) checks every answer the app gives against them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema


class ErrorData(BaseModel):
    """eventId (in the log line of this failure), traceId, and what the error adds."""

    model_config = ConfigDict(extra="allow")

    event_id: str | SkipJsonSchema[None] = Field(default=None, alias="eventId")
    trace_id: str | SkipJsonSchema[None] = Field(default=None, alias="traceId")


class ErrorBody(BaseModel):
    """Every refusal outside JSON-RPC: what went wrong, and the handles to report it by."""

    error: str
    data: ErrorData | SkipJsonSchema[None] = None


JsonRpcId = str | int | None


class JsonRpcMessage(BaseModel):
    """A JSON-RPC 2.0 request, or a notification when it has no id."""

    jsonrpc: Literal["2.0"]
    id: JsonRpcId = None
    method: str
    params: dict[str, Any] | SkipJsonSchema[None] = None


class JsonRpcErrorObject(BaseModel):
    code: int
    message: str
    data: Any = None


class JsonRpcAnswer(BaseModel):
    """A JSON-RPC 2.0 response: a result or an error."""

    jsonrpc: Literal["2.0"]
    id: JsonRpcId = None
    result: Any = None
    error: JsonRpcErrorObject | SkipJsonSchema[None] = None


class HealthAnswer(BaseModel):
    """status ok with the model and its categories; starting or failed while the backend starts; degraded with the error.

    Where embedder calls go, the cache and Redis state and the SSE streams are added as further keys."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "degraded", "starting", "failed"]
    error: str | SkipJsonSchema[None] = None
    categories: list[str] | SkipJsonSchema[None] = None
    model: str | SkipJsonSchema[None] = None
    index_size: int | SkipJsonSchema[None] = None


class ReadyAnswer(BaseModel):
    ready: bool
    draining: bool | SkipJsonSchema[None] = None  # true once SIGTERM came: route elsewhere


class RouterClassifyRequest(BaseModel):
    """POST /classify, the vLLM Semantic Router's remote classifier (label_distribution.v1): one text, or a list of them."""

    inputs: str | list[str] = Field(description="The text to classify, or a list of texts (one distribution each, in order).")


class LabelScore(BaseModel):
    """One label of a distribution: every label of the classifier appears once in each answer."""

    label: str
    score: float = Field(ge=0.0, le=1.0)
