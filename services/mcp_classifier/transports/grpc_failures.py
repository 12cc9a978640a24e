"""How the public gRPC API fails a call: the error table's status, the event id in trailing metadata.

That includes a request that is not a valid protobuf message. grpc decodes a request before any
handler runs, and an exception in the decoder answers ``UNKNOWN: Unexpected <class 'DecodeError'>``,
where the table says a parse error is ``INVALID_ARGUMENT``. ``DecodeGuard`` wraps each method's
decoder so that it hands the handler an ``Undecodable`` marker instead, and the handler refuses it
like any other failure: the table's status, an event id, a log line.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf.message import DecodeError

from ..protocol import correlation
from ..protocol.errors import ERROR_TABLE, settle
from ..protocol.excerpts import clip
from ..protocol.jsonrpc import PARSE_ERROR, JsonRpcError

TRACE_ID_METADATA = "x-trace-id"
EVENT_ID_METADATA = "x-event-id"
MAX_REASON_CHARS = 200  # protobuf's reason names the message type and the fault; it holds none of the request's bytes

Behaviour = Callable[[Any, grpc.aio.ServicerContext], Any]  # a coroutine function, or a plain one on a sync handler


async def abort(context: grpc.aio.ServicerContext, status: str, message: str, event_id: str) -> NoReturn:
    """End the call with ``status`` (a grpc.StatusCode name) and the failure's event id in the trailing metadata."""
    context.set_trailing_metadata(((EVENT_ID_METADATA, event_id),))
    await context.abort(grpc.StatusCode[status], message)
    raise AssertionError("unreachable: abort raises")


@dataclass(frozen=True)
class Undecodable:
    """What a method's handler receives in place of a request its bytes could not be decoded into."""

    reason: str


def tolerant(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """``deserializer`` that answers ``Undecodable`` instead of raising on bytes that are not its message."""

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as exc:
            return Undecodable(str(exc))

    return deserialize


async def refuse_undecodable(
    context: grpc.aio.ServicerContext, method: str, request: Undecodable, observer: correlation.DoorObserver | None = None
) -> NoReturn:
    """A parse error, said as every door says one: the table's status, an event id that is logged, the trace id."""
    record = correlation.begin("grpc", observer=observer)
    correlation.note(era="grpc", method=method)
    try:
        await context.send_initial_metadata(((TRACE_ID_METADATA, record.trace_id),))
        reason = clip(request.reason, MAX_REASON_CHARS)
        error = JsonRpcError(PARSE_ERROR, f"the request is not a valid protobuf message for {method}: {reason}")
        kind = settle(error, method)
        await abort(context, ERROR_TABLE[kind].grpc_status, error.message, error.event_id or "")
    finally:
        correlation.finish(record)


class DecodeGuard(grpc.aio.ServerInterceptor):
    """Gives every unary method a decoder that never raises, and a handler that refuses what it could not decode."""

    def __init__(self, observer: correlation.DoorObserver | None = None) -> None:
        self.observer = observer  # a refusal is a request on the grpc door too

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or handler.request_deserializer is None:
            return handler  # unknown methods (UNIMPLEMENTED), streams, handlers that read raw bytes
        method = (handler_call_details.method or "").rsplit("/", 1)[-1]
        behaviour: Behaviour = handler.unary_unary

        async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, Undecodable):
                await refuse_undecodable(context, method, request, self.observer)
            answer = behaviour(request, context)
            return await answer if inspect.isawaitable(answer) else answer

        return handler._replace(
            request_deserializer=tolerant(handler.request_deserializer), unary_unary=guarded
        )  # grpc's handlers are namedtuples
