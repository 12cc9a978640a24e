"""The gateway's public gRPC API (``--grpc-port``): Classify, ClassifyBatch, ListCategories, plus health and reflection.

Each call runs the same MCP tool as ``POST /mcp`` does (``classify_text``, ``classify_batch``,
``list_categories``) through the dispatcher, so validation, the Redis cache and the spans are the
HTTP ones, and failures map through the one error table to a gRPC status. The bearer key travels
in ``authorization`` metadata and is checked against the same keys as HTTP; health checks and
reflection are open, like /health.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from ..api.v1 import classifier_pb2 as pb
from ..api.v1 import gateway_pb2 as gpb
from ..api.v1 import gateway_pb2_grpc as gpb_grpc
from ..edge.keys import ApiKeys, bearer_token
from ..protocol import correlation
from ..protocol.dispatcher import META_EVENT_ID, McpDispatcher
from ..protocol.errors import ERROR_TABLE, ErrorKind, settle
from ..protocol.jsonrpc import JsonRpcError
from ..protocol.refusals import record_refusal
from ..protocol.tools import error_message
from ..telemetry import GatewayMetrics
from .grpc_failures import TRACE_ID_METADATA, DecodeGuard, abort

SERVICE_NAME = gpb.DESCRIPTOR.services_by_name["ClassifierGateway"].full_name
UNAUTHENTICATED = "UNAUTHENTICATED"  # the gRPC status of a missing or wrong key
UNAUTHORIZED = "unauthorized"  # its refusal kind, as the HTTP edge names it
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.ServerReflection/", "/grpc.reflection.v1.ServerReflection/")


class GatewayServicer(gpb_grpc.ClassifierGatewayServicer):
    def __init__(self, dispatcher: McpDispatcher, metrics: GatewayMetrics | None = None) -> None:
        self.dispatcher = dispatcher
        self.metrics = metrics

    def _in_flight(self) -> AbstractContextManager[Any]:
        return self.metrics.grpc_in_flight.track_inprogress() if self.metrics is not None else nullcontext()

    async def Classify(self, request: gpb.ClassifyTextRequest, context: grpc.aio.ServicerContext) -> gpb.ClassifyTextResponse:
        arguments = {"text": request.text, "with_probabilities": request.with_probabilities}
        payload, trace_id = await self._tool(context, "classify_text", _picking(arguments, request.classifier))
        return gpb.ClassifyTextResponse(result=_classification(payload), trace_id=trace_id)

    async def ClassifyBatch(self, request: pb.ClassifyRequest, context: grpc.aio.ServicerContext) -> gpb.ClassifyBatchResponse:
        arguments = {"texts": list(request.texts), "with_probabilities": request.with_probabilities}
        payload, trace_id = await self._tool(context, "classify_batch", _picking(arguments, request.classifier))
        items = [
            gpb.ClassifyBatchItem(error=item["error"]) if "error" in item else gpb.ClassifyBatchItem(result=_classification(item))
            for item in payload["results"]
        ]
        return gpb.ClassifyBatchResponse(results=items, classified=payload["classified"], failed=payload["failed"], trace_id=trace_id)

    async def ListCategories(self, request: gpb.ListCategoriesRequest, context: grpc.aio.ServicerContext) -> gpb.ListCategoriesResponse:
        payload, trace_id = await self._tool(context, "list_categories", _picking({}, request.classifier))
        categories = [
            pb.Category(
                name=name,
                description=payload["category_descriptions"].get(name, ""),
                system_prompt=payload["category_system_prompts"].get(name, ""),
            )
            for name in payload["categories"]
        ]
        return gpb.ListCategoriesResponse(categories=categories, trace_id=trace_id)

    async def _tool(self, context: grpc.aio.ServicerContext, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Run one MCP tool; its isError result or JSON-RPC error becomes the table's gRPC status (the call is aborted)."""
        traceparent = next((value for key, value in context.invocation_metadata() or () if key == "traceparent"), None)
        observer = self.metrics.observe_door if self.metrics is not None else None
        record = correlation.begin("grpc", traceparent=str(traceparent) if traceparent else None, observer=observer)
        correlation.note(era="grpc", method=name)
        try:
            with self._in_flight():
                await context.send_initial_metadata(((TRACE_ID_METADATA, record.trace_id),))
                try:
                    result = await self.dispatcher.call("tools/call", {"name": name, "arguments": arguments})
                except JsonRpcError as exc:
                    kind = settle(exc, name)
                    await abort(context, ERROR_TABLE[kind].grpc_status, exc.message, exc.event_id or "")
                if result.get("isError") is True:  # the dispatcher logged it under this event id
                    event_id = result["_meta"][META_EVENT_ID]
                    await abort(context, ERROR_TABLE[ErrorKind.TOOL_EXECUTION_FAILED].grpc_status, error_message(result), event_id)
                return result["structuredContent"], record.trace_id
        finally:
            correlation.finish(record)


def _picking(arguments: dict[str, Any], classifier: str) -> dict[str, Any]:
    """The tool's arguments with the request's classifier; proto3's empty string (unset) leaves the tool's default."""
    return {**arguments, "classifier": classifier} if classifier else arguments


def _classification(payload: dict[str, Any]) -> pb.Classification:
    """The tool's JSON answer as the message: every field the JSON carries (label_scores is /classify's alone)."""
    revision = payload.get("_meta") or {}
    return pb.Classification(
        class_index=payload["class"],
        category=payload["category"],
        confidence=payload["confidence"],
        model=payload["model"],
        use_reasoning=payload["use_reasoning"],
        probabilities=payload.get("probabilities", []),
        entropy=payload.get("entropy", 0.0),
        out_of_scope=not payload["in_scope"],
        labels=payload["labels"],
        margin=payload["margin"],
        model_id=revision.get("model_id", ""),
        category_set_version=revision.get("category_set_version", ""),
        policy_version=revision.get("policy_version", ""),
        language=payload["language"],
        language_unserved=not payload["language_served"],
    )


class BearerKeyInterceptor(grpc.aio.ServerInterceptor):
    """The HTTP edge's key check for gRPC: ``authorization: Bearer <key>`` metadata, UNAUTHENTICATED otherwise."""

    def __init__(self, keys: ApiKeys, observer: correlation.DoorObserver | None = None) -> None:
        self.keys = keys
        self.observer = observer  # a refused call is a request on the grpc door, counted under its kind

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method or ""
        if not self.keys.enabled or method.startswith(OPEN_SERVICES):
            return await continuation(handler_call_details)
        authorization = next((str(v) for k, v in handler_call_details.invocation_metadata or () if k == "authorization"), "")
        token = bearer_token(authorization)
        if token is not None and self.keys.verify(token):
            return await continuation(handler_call_details)
        reason = "invalid bearer token" if authorization else "missing bearer token: send metadata authorization: Bearer <key>"

        async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
            record = correlation.begin("grpc", observer=self.observer)
            try:
                event_id = record_refusal(UNAUTHORIZED, f"gRPC {UNAUTHENTICATED}", reason)
                await abort(context, UNAUTHENTICATED, reason, event_id)
            finally:
                correlation.finish(record)

        return grpc.unary_unary_rpc_method_handler(refuse)


def connection_age_options(max_age_s: float, grace_s: float) -> list[tuple[str, int]]:
    """gRPC server options that end each client connection after max_age_s: a long-lived client then reconnects and,
    through the Service, may land on a gateway pod the autoscaler added (without it, it stays where it first landed)."""
    if max_age_s <= 0:
        return []
    return [
        ("grpc.max_connection_age_ms", int(max_age_s * 1000)),
        ("grpc.max_connection_age_grace_ms", int(grace_s * 1000)),
    ]


class PublicGrpcServer:
    """Started after the backend (so health says SERVING only when calls can succeed), stopped before it."""

    def __init__(
        self,
        dispatcher: McpDispatcher,
        keys: ApiKeys,
        *,
        host: str,
        port: int,
        reflection: bool,
        tracing: bool,
        metrics: GatewayMetrics | None = None,
        max_connection_age_s: float = 0.0,
        max_connection_age_grace_s: float = 0.0,
    ) -> None:
        self.dispatcher = dispatcher
        self.options = connection_age_options(max_connection_age_s, max_connection_age_grace_s)
        self.keys = keys
        self.metrics = metrics  # the gateway's /metrics registry: calls counted on the grpc door
        self.host = host
        self.requested_port = port
        self.reflection = reflection
        self.tracing = tracing
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._health = HealthServicer()

    async def start(self) -> None:
        # The key is checked first: a caller without one learns nothing else, not even that its bytes were garbage.
        observer = self.metrics.observe_door if self.metrics is not None else None
        interceptors: list[Any] = [BearerKeyInterceptor(self.keys, observer), DecodeGuard(observer)]
        if self.tracing:
            from opentelemetry.instrumentation.grpc import aio_server_interceptor

            interceptors.insert(0, aio_server_interceptor())  # outermost: the span is current while the call runs
        server = grpc.aio.server(interceptors=interceptors, options=self.options)
        gpb_grpc.add_ClassifierGatewayServicer_to_server(GatewayServicer(self.dispatcher, self.metrics), server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        services = [SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
        if self.reflection:
            from grpc_reflection.v1alpha import reflection

            reflection.enable_server_reflection([*services, reflection.SERVICE_NAME], server)
        self.port = server.add_insecure_port(f"{self.host}:{self.requested_port}")
        await server.start()
        self._server = server
        for name in ("", SERVICE_NAME):
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        print(f"gRPC API listening on {self.host}:{self.port} (reflection {'on' if self.reflection else 'off'})", flush=True)

    async def close(self, grace_s: float = 5.0) -> None:
        if self._server is not None:
            await self._health.enter_graceful_shutdown()
            await self._server.stop(grace_s)
            self._server = None
