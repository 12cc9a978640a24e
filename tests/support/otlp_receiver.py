"""A minimal OTLP/gRPC trace receiver (from opentelemetry-proto) that keeps every span it is sent."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    link_trace_ids: tuple[str, ...]
    attributes: dict


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.raw: list[bytes] = []  # every export request as sent: events, status messages and all
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            self.raw.append(request.SerializeToString())
            for resource_spans in request.resource_spans:
                service = next((a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), "")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                service=service,
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                link_trace_ids=tuple(link.trace_id.hex() for link in span.links),
                                attributes={a.key: _value(a.value) for a in span.attributes},
                            )
                        )
        return trace_service_pb2.ExportTraceServiceResponse()


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":  # a sequence attribute: its values, each read the same way
        return [_value(item) for item in v.array_value.values]
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self._collector = _Collector()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self._collector, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)

    def spans(self) -> list[ReceivedSpan]:
        with self._collector.lock:
            return list(self._collector.spans)

    def raw_exports(self) -> bytes:
        with self._collector.lock:
            return b"".join(self._collector.raw)
