"""Prometheus metrics (and, later, OpenTelemetry setup). Used by all layers, depends on none of them."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol, TextIO, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# The doors, as the access log names them: http (JSON-RPC on POST /mcp), rest (POST /mcp/<method>), sse (legacy
# POST /messages), ws (WebSocket /ws), grpc (the public gRPC API), stdio, tool_filter (POST /v1/tools/filter and /feedback),
# classify (POST /classify, the Semantic Router's remote classifier), openai (POST /v1/embeddings, GET /v1/models).
DOORS = frozenset({"http", "rest", "sse", "ws", "grpc", "stdio", "tool_filter", "classify", "openai"})
OTHER_DOOR = "other"  # any other path (a 404): the label stays bounded whatever a caller sends
OK = "ok"  # a request's outcome when it did not fail

# prometheus_client's multiprocess mode: set (before prometheus_client is imported) in every gateway worker of
# `serve --workers N`, each worker then writes its values to files there and /metrics on any worker sums them all.
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
MIRROR_PERIOD_S = 1.0  # multiprocess mode: how often a worker copies its batchers' readings into the shared files


def multiprocess_dir() -> str | None:
    """The shared metrics directory when this process is one of several gateway workers, else None."""
    return os.environ.get(MULTIPROCESS_DIR_ENV) or None


class BatchingSource(Protocol):
    """What a batcher shows the scraper: read at scrape time, so the batcher itself needs no metrics library."""

    @property
    def queue_depth(self) -> int: ...

    @property
    def batch_sizes(self) -> BatchSizesReading: ...


class BatchSizesReading(Protocol):
    total_texts: int

    def cumulative(self) -> list[tuple[float, int]]: ...


class BatchingCollector(Collector):
    """Queue depth and batch sizes of the backends' batchers, read when /metrics is scraped."""

    def __init__(self) -> None:
        self._sources: dict[str, Callable[[], BatchingSource | None]] = {}

    def watch(self, backend: str, source: Callable[[], BatchingSource | None]) -> None:
        """``source`` answers the batcher now, or None while there is none (an embedded Ray still starting)."""
        self._sources[backend] = source

    @property
    def sources(self) -> dict[str, Callable[[], BatchingSource | None]]:
        return self._sources

    def collect(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("mcp_classifier_backend_queue_depth", "Requests waiting for a batch, by backend", labels=["backend"])
        sizes = HistogramMetricFamily("mcp_classifier_backend_batch_size", "Texts per batch sent, by backend", labels=["backend"])
        for backend, source in self._sources.items():
            batcher = source()
            if batcher is None:
                continue
            depth.add_metric([backend], batcher.queue_depth)
            reading = batcher.batch_sizes
            buckets = [(floatToGoString(bound), count) for bound, count in reading.cumulative()]
            sizes.add_metric([backend], buckets, reading.total_texts)
        yield depth
        yield sizes


class BatchingMirror:
    """Multiprocess mode: copies a BatchingCollector's readings into file-backed metrics every MIRROR_PERIOD_S.

    The batchers are read at scrape time, which only the process holding them can do; with several
    workers a scrape reaches one of them. So each worker publishes its own readings (queue depth as a live
    sum, batch sizes as histogram increments) and the multiprocess collector adds them up like any metric.
    """

    def __init__(self, collector: BatchingCollector) -> None:
        self._collector = collector
        self._depth = Gauge(
            "mcp_classifier_backend_queue_depth",
            "Requests waiting for a batch, by backend",
            ["backend"],
            registry=None,
            multiprocess_mode="livesum",
        )
        self._sizes: Histogram | None = None
        self._published: dict[str, tuple[list[int], int]] = {}  # backend -> (per-bucket counts, texts) already added
        threading.Thread(target=self._run, name="metrics-mirror", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(MIRROR_PERIOD_S)
            self.sync()

    def sync(self) -> None:
        for backend, source in list(self._collector.sources.items()):
            batcher = source()
            if batcher is None:
                continue
            self._depth.labels(backend).set(batcher.queue_depth)
            reading = batcher.batch_sizes
            cumulative = reading.cumulative()
            if self._sizes is None:
                bounds = [bound for bound, _ in cumulative]
                self._sizes = Histogram(
                    "mcp_classifier_backend_batch_size", "Texts per batch sent, by backend", ["backend"], buckets=bounds, registry=None
                )
            counts = [count - (cumulative[i - 1][1] if i else 0) for i, (_, count) in enumerate(cumulative)]
            before, texts_before = self._published.get(backend, ([0] * len(counts), 0))
            child = self._sizes.labels(backend)
            # prometheus_client offers no "add n observations to bucket i": its per-bucket values are incremented directly.
            for bucket, (now, then) in zip(child._buckets, zip(counts, before, strict=True), strict=True):
                if now > then:
                    bucket.inc(now - then)
            if reading.total_texts > texts_before:
                child._sum.inc(reading.total_texts - texts_before)
            self._published[backend] = (counts, reading.total_texts)


class HasStatus(Protocol):
    """A route's response, as far as its metrics read it."""

    @property
    def status_code(self) -> int: ...


Answered = TypeVar("Answered", bound=HasStatus)


class GatewayMetrics:
    """One registry per app instance, so several apps in one process (tests) never collide."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        # Counters and histograms would each add a *_created series: not needed by Prometheus, and a second series
        # per counter. The switch is process-wide in prometheus_client; every registry here wants it off.
        disable_created_metrics()
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mcp_classifier_requests", "HTTP requests by route and status code", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "mcp_classifier_request_seconds", "HTTP request latency by route", ["route"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.errors = Counter(
            "mcp_classifier_errors", "Errors answered, by kind (parse, invalid, backend_unavailable, ...)", ["kind"], registry=self.registry
        )

        self.mcp_methods = Counter(
            "mcp_classifier_mcp_methods",
            "MCP requests by protocol era (handshake or 2026-07-28), method and outcome (ok or the error kind)",
            ["era", "method", "outcome"],
            registry=self.registry,
        )

        self.answers = Counter(
            "mcp_classifier_answers",
            "Classify answers by outcome: in_scope, out_of_scope (fits no category) or unserved_language; by classifier",
            ["outcome", "classifier"],  # classifier: a configured name (default, or one the classifiers setting names)
            registry=self.registry,
        )
        self.unserved_languages = Counter(
            "mcp_classifier_unserved_language_answers",
            "Answers to queries in a language the model does not read, by detected language (ISO 639-1, und: unclear)",
            ["language"],
            registry=self.registry,
        )

        # multiprocess_mode: with several gateway workers, /metrics shows the sum over the live ones (the replica's total).
        self.sse_streams = Gauge(
            "mcp_classifier_sse_streams",
            "Legacy HTTP+SSE streams open on this replica",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.websocket_connections = Gauge(
            "mcp_classifier_websocket_connections",
            "WebSocket connections open on this replica",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.grpc_in_flight = Gauge(
            "mcp_classifier_grpc_calls_in_flight",
            "Public gRPC API calls being answered",
            registry=self.registry,
            multiprocess_mode="livesum",
        )

        self.tool_feedback = Counter(
            "mcp_classifier_tool_feedback",
            "POST /v1/tools/feedback by outcome: stored, unavailable (Redis unreachable: nothing kept), off (tool_feedback), "
            "invalid, failed (the request could not be embedded)",
            ["outcome"],
            registry=self.registry,
        )

        self.door_requests = Counter(
            "mcp_classifier_door_requests",
            "Requests by door (http, rest, sse, ws, grpc, stdio, tool_filter, classify, openai)",
            ["door"],
            registry=self.registry,
        )
        self.door_errors = Counter(
            "mcp_classifier_door_errors",
            "Requests that failed, by door and kind (the access log's outcome)",
            ["door", "kind"],
            registry=self.registry,
        )
        self.door_latency = Histogram(
            "mcp_classifier_door_request_seconds", "Request latency by door", ["door"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.batching = BatchingCollector()
        self.registry.register(self.batching)
        self._multiprocess_dir = multiprocess_dir()
        if self._multiprocess_dir is not None:
            BatchingMirror(self.batching)

    def observe_door(self, door: str, outcome: str, seconds: float) -> None:
        """One request through a door: counted, timed, and counted again under its kind when it failed."""
        label = door if door in DOORS else OTHER_DOOR
        self.door_requests.labels(label).inc()
        self.door_latency.labels(label).observe(seconds)
        if outcome != OK:
            self.door_errors.labels(label, outcome).inc()

    def observe_answer(self, in_scope: bool, language_served: bool, language: str, classifier: str = "default") -> None:
        if not language_served:
            self.answers.labels("unserved_language", classifier).inc()
            self.unserved_languages.labels(language or "und").inc()
        else:
            self.answers.labels("in_scope" if in_scope else "out_of_scope", classifier).inc()

    def observe_method(self, era: str, method: str, outcome: str) -> None:
        self.mcp_methods.labels(era, method, outcome).inc()

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    async def observed(self, route: str, answer: Awaitable[Answered]) -> Answered:
        """Await a route's ``answer`` and write its request metrics: what every HTTP route does around its work."""
        started = time.perf_counter()
        response = await answer
        self.observe(route, response.status_code, time.perf_counter() - started)
        return response

    def render(self) -> bytes:
        """This process's metrics; with several gateway workers, the sum over all of them (their shared files)."""
        if self._multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self._multiprocess_dir)
        return generate_latest(registry)


# ---- logs ------------------------------------------------------------------------------------
TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Read by huggingface_hub when it is imported, and by transformers through it: their download and weight-loading
# bars (tqdm). Inherited by every process this one starts (gateway workers, the embedded Ray node's replicas).
PROGRESS_BARS_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"


def resolve_log_format(log_format: str, stream: TextIO) -> str:
    """auto: readable lines where a person reads the stream (a terminal), JSON lines where a program does."""
    if log_format != "auto":
        return log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def configure_logging(level: str, log_format: str, *, with_pid: bool = False, progress_bars: bool = False) -> None:
    """stderr, one line per record: JSON objects (python-json-logger; ``extra`` fields become keys) or plain text.

    ``log_format`` auto picks text on a terminal and JSON otherwise (resolve_log_format). ``with_pid``: each line
    names its process (a gateway worker of `serve --workers N`: several write one stream). ``progress_bars``
    off keeps the model libraries' tqdm bars out of the log stream (a user's own HF_HUB_DISABLE_PROGRESS_BARS wins);
    call it before they are imported."""
    import logging
    import sys

    if not progress_bars:
        os.environ.setdefault(PROGRESS_BARS_ENV, "1")
    handler = logging.StreamHandler(sys.stderr)
    if resolve_log_format(log_format, sys.stderr) == "json":
        from pythonjsonlogger.json import JsonFormatter

        fields = "%(levelname)s %(name)s %(process)d %(message)s" if with_pid else "%(levelname)s %(name)s %(message)s"
        handler.setFormatter(
            JsonFormatter(fields, rename_fields={"levelname": "level", "name": "logger", "process": "pid"}, timestamp="time")
        )
    else:
        handler.setFormatter(
            logging.Formatter(TEXT_LOG_FORMAT.replace("%(name)s", "%(name)s[%(process)d]") if with_pid else TEXT_LOG_FORMAT)
        )
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


# ---- OpenTelemetry ----------------------------------------------------------------------------
_tracing_configured = False


def setup_tracing(default_service_name: str) -> bool:
    """Configure the OTel SDK from the standard OTEL_* variables only.

    An OTLP exporter is added when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set (protocol from
    OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, grpc by default); otherwise the SDK stays off. Idempotent per process.
    """
    global _tracing_configured
    if _tracing_configured:
        return True
    import os

    env = os.environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint or env.get("OTEL_TRACES_EXPORTER", "otlp") == "none" or env.get("OTEL_SDK_DISABLED") == "true":
        return False
    # The SDK only where it exports: its resources module alone imports psutil, a cost the handshake need not wait for.
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": default_service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    else:
        # assignment: the HTTP exporter stands in for the gRPC one under the same name (same interface)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[assignment]
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # the exporter reads its own OTEL_* env
    trace.set_tracer_provider(provider)
    _tracing_configured = True
    return True


def shutdown_tracing() -> None:
    """Flush spans still buffered (called on shutdown so the last requests are not lost)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()


def instrument_grpc_client() -> None:
    """Inject traceparent into every grpc.aio call's metadata. Must run before channels are made."""
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient

    instrumentor = GrpcAioInstrumentorClient()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()
