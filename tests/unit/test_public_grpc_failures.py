"""The public gRPC door's failures follow the error table: a real grpc server in process (port 0) over the fake backend.

A request whose bytes are not its protobuf message is a parse error, INVALID_ARGUMENT with an event id
(not grpc's own UNKNOWN "Unexpected DecodeError"); valid calls pass through the same decoder untouched,
and a tool's refusal stays short whatever the request's size.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest

from mcp_classifier.api.v1 import classifier_pb2 as pb
from mcp_classifier.api.v1 import gateway_pb2 as gpb
from mcp_classifier.api.v1 import gateway_pb2_grpc as gpb_grpc
from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.settings import Settings
from mcp_classifier.transports.grpc_public import SERVICE_NAME, PublicGrpcServer
from mcp_classifier.wiring import build_dispatcher
from tests.support.fake_backend import FakeBackend

CORRUPT = b"\x0a\x05ab"  # field 1 says 5 bytes follow; 2 do: protobuf cannot decode it
CALL_TIMEOUT_S = 10
KEY = "grpc-unit-key"
SHORT_ERROR_CHARS = 1024


def with_server(keys: ApiKeys, body: Callable[[grpc.aio.Channel], Awaitable[Any]]) -> Any:
    """Run ``body`` against a real gRPC server on a free loopback port, then stop the server."""

    async def run() -> Any:
        backend = FakeBackend()
        server = PublicGrpcServer(build_dispatcher(Settings(), backend), keys, host="127.0.0.1", port=0, reflection=False, tracing=False)
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                return await body(channel)
        finally:
            await server.close(grace_s=0)

    return asyncio.run(run())


async def raw_call(
    channel: grpc.aio.Channel, method: str, payload: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> grpc.aio.AioRpcError:
    """Send ``payload`` as it is (no serializer) and return the error the call ends with."""
    call = channel.unary_unary(f"/{SERVICE_NAME}/{method}", request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await call(payload, metadata=metadata, timeout=CALL_TIMEOUT_S)
    return failed.value


@pytest.mark.parametrize("method", ["Classify", "ClassifyBatch", "ListCategories"])
def test_corrupt_bytes_are_invalid_argument_with_an_event_id(method: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    error = with_server(ApiKeys(None, None), lambda channel: raw_call(channel, method, CORRUPT))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert "not a valid protobuf message" in (error.details() or "") and "Unexpected" not in (error.details() or "")
    event_id = dict(error.trailing_metadata() or ())["x-event-id"]
    assert len(event_id) == 32
    assert any(getattr(r, "event_id", None) == event_id and getattr(r, "error_kind", None) == "parse_error" for r in caplog.records)
    assert len(dict(error.initial_metadata() or ())["x-trace-id"]) == 32


def test_the_key_is_checked_before_the_bytes_and_its_refusal_has_an_event_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    error = with_server(ApiKeys(KEY, None), lambda channel: raw_call(channel, "Classify", CORRUPT))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    event_id = dict(error.trailing_metadata() or ())["x-event-id"]
    assert any(getattr(r, "event_id", None) == event_id and getattr(r, "error_kind", None) == "unauthorized" for r in caplog.records)


def test_valid_calls_pass_the_decoder_and_a_big_batchs_refusal_is_short() -> None:
    async def calls(channel: grpc.aio.Channel) -> tuple[Any, grpc.aio.AioRpcError]:
        stub = gpb_grpc.ClassifierGatewayStub(channel)
        answer = await stub.Classify(gpb.ClassifyTextRequest(text="integrate x squared"), timeout=CALL_TIMEOUT_S)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ClassifyBatch(pb.ClassifyRequest(texts=["x" * 3000] * 300), timeout=CALL_TIMEOUT_S)
        return answer, refused.value

    answer, refused = with_server(ApiKeys(None, None), calls)
    assert answer.result.category and len(answer.trace_id) == 32
    details = refused.details() or ""
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and len(details) < SHORT_ERROR_CHARS, len(details)
    assert "'texts'" in details and "300" in details and "256" in details
