"""Reading request bodies under a size limit and writing JSON answers: shared by every HTTP route."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response

from ..protocol.errors import ErrorKind, rule_of, settle
from ..protocol.jsonrpc import INVALID_REQUEST, PARSE_ERROR, JsonRpcError
from ..protocol.refusals import refusal_body
from ..telemetry import GatewayMetrics


class BodyTooLarge(Exception):
    pass


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """numpy arrays are written as lists (an embedding answer holds them)."""
    body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def rest_error(exc: JsonRpcError, method: str, metrics: GatewayMetrics) -> Response:
    """The REST shape of an error: {"error", "data"} with the table's HTTP status; data carries the event and trace ids."""
    kind = settle(exc, method)
    metrics.errors.labels(kind.value).inc()
    payload: dict[str, Any] = {"error": exc.message}
    error_data = exc.to_error().get("data")
    if error_data is not None:
        payload["data"] = error_data
    return json_response(payload, status=rule_of(exc).rest_status)


def refusal(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Response:
    """A refusal outside the error table, in the REST error shape with its event id (logged) and trace id."""
    return json_response(refusal_body(kind, status, message), status=status, headers=headers)


async def read_body(request: Request, limit: int) -> bytes:
    """Read at most ``limit`` bytes; refuse early on Content-Length, and while streaming otherwise."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def body_too_large(limit: int) -> JsonRpcError:
    return JsonRpcError(INVALID_REQUEST, f"request body exceeds {limit} bytes", kind=ErrorKind.BODY_TOO_LARGE)


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON ({} when empty); a body over ``limit`` or not JSON raises the protocol error for it."""
    try:
        raw = await read_body(request, limit)
    except BodyTooLarge:
        raise body_too_large(limit) from None
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise JsonRpcError(PARSE_ERROR, f"request body is not valid JSON: {exc}") from None
