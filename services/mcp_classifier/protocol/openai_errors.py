"""Errors in OpenAI's shape, for the OpenAI-compatible routes (``/v1/embeddings``, ``/v1/models``).

OpenAI's clients read ``{"error": {"message", "type", "param", "code"}}`` and raise by the HTTP status, so these
routes, and the edge's refusals in front of them, answer in that shape rather than the service's own. Each is
still logged under an event id, as every other refusal is (``refusals.record_refusal``); the trace id is in the
``X-Trace-Id`` header.
"""

from __future__ import annotations

import logging
from typing import Any

from .refusals import SERVER_SIDE, record_refusal

INVALID_REQUEST = "invalid_request_error"
SERVER_ERROR = "server_error"

# The edge guard's refusal kinds (edge.middleware): OpenAI's type and code for each.
_EDGE_KINDS: dict[str, tuple[str, str]] = {
    "unauthorized": (INVALID_REQUEST, "invalid_api_key"),
    "forbidden_host": ("permission_error", "forbidden_host"),
    "forbidden_origin": ("permission_error", "forbidden_origin"),
    "rate_limited": ("rate_limit_error", "rate_limit_exceeded"),
}


class OpenAiError(Exception):
    """A refusal of an OpenAI-compatible route: its HTTP status and OpenAI's four fields."""

    def __init__(
        self, status: int, message: str, *, type: str = INVALID_REQUEST, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The answer's body; logs the refusal under a new event id."""
        return openai_error_body(self.status, self.message, type=self.type, param=self.param, code=self.code)


def openai_error_body(status: int, message: str, *, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """Log the refusal (kind: the code, else the type) and return OpenAI's error body for it."""
    record_refusal(code or type, f"HTTP {status}", message, level=logging.WARNING if status >= SERVER_SIDE else logging.INFO)
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def edge_refusal_body(kind: str, status: int, message: str) -> dict[str, Any]:
    """The edge guard's refusal (401, 403, 429) in OpenAI's shape."""
    type_, code = _EDGE_KINDS.get(kind, (INVALID_REQUEST, kind))
    return openai_error_body(status, message, type=type_, code=code)
