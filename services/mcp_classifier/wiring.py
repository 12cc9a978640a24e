"""The composition root: settings -> classifier, backend, dispatcher, app.

Only the command line, the benchmarks and the tests import this module. Everything it wires
depends inwards only (see [tool.importlinter] in pyproject.toml), so the choices of which
backend, which cache and which edge live here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .backend.base import BackendHealth, ClassificationBackend, ReloadableBackend
from .backend.coalescer import BatchingOptions
from .backend.starting import StartingBackend
from .cache.embeddings import ToolEmbeddings
from .classify.build import build_classifier, build_registry, fill_local_threading, model_calls_in_flight
from .classify.registry import category_sources, reloadable_sources
from .protocol.classify_tools import register_classification_tools
from .protocol.dispatcher import McpDispatcher
from .protocol.tools import ToolRegistry
from .settings import Settings
from .telemetry import BatchingSource, GatewayMetrics
from .toolfilter.tool_filter import PastQueryOptions, ToolFilter, default_threshold_for, register_tool_filter

if TYPE_CHECKING:  # torch, Ray, FastAPI and Redis are imported only by the paths that use them
    from fastapi import FastAPI

    from .backend.grpc_client import GrpcBackend
    from .backend.local import LocalBatchingBackend
    from .cache.runtime import RedisRuntime
    from .edge import EdgeGuard
    from .redis_io.redis_link import RedisLink
    from .transports.http import DoorLifecycle
    from .transports.openai_embeddings import EmbeddingsOptions
    from .util.asgi import ASGIApp

__all__ = [
    "Gateway",
    "HttpDoors",
    "BuiltBackend",
    "build_backend",
    "build_classifier",
    "build_dispatcher",
    "build_embeddings_options",
    "build_gateway",
    "build_grpc_backend",
    "build_handshake_door",
    "build_http_app",
    "build_http_doors",
    "build_local_backend",
]


# ---- backends ----------------------------------------------------------------------------------
def build_local_backend(settings: Settings) -> LocalBatchingBackend:
    """The model in this process (threads, or --model-processes N spawned processes)."""
    from .backend.local import LocalBatchingBackend
    from .backend.model_worker import ModelWorker, ProcessModelWorker, ThreadModelWorker

    settings = fill_local_threading(settings)
    serving = settings.serving
    worker: ModelWorker
    if serving.model_processes:
        worker = ProcessModelWorker(settings.model_dump_json(), serving.model_processes)
    else:
        worker = ThreadModelWorker(lambda: build_registry(settings), threads=serving.model_threads)
    # One batch in flight per model thread or process, whatever max_concurrent_batches says of the embedder.
    batching = replace(BatchingOptions.from_settings(settings.batching), max_concurrent_batches=model_calls_in_flight(serving))
    return LocalBatchingBackend(
        worker,
        batching=batching,
        request_timeout_s=serving.request_timeout_s,
    )


def build_grpc_backend(settings: Settings, target: str, *, embedded: bool = False) -> GrpcBackend:
    """A client of Serve's gRPC proxy at ``target`` (host:port), or with ray_direct_ingress of the replicas
    themselves, listed by the embedded node's driver or by the cluster's Serve REST API."""
    from .backend.grpc_client import READY_PROBE_TIMEOUT_S, GrpcBackend
    from .embedder.replica_targets import TargetSource, embedded_target_source, serve_api_target_source

    ray = settings.ray
    replicas: TargetSource | None = None
    if ray.ray_direct_ingress and embedded:
        replicas = embedded_target_source(ray.serve_app_name)
    elif ray.ray_direct_ingress and ray.ray_serve_api_url:
        replicas = serve_api_target_source(
            ray.ray_serve_api_url,
            ray.serve_app_name,
            timeout_s=READY_PROBE_TIMEOUT_S,
            token_file=ray.ray_auth_token_file,
        )
    return GrpcBackend(
        target,
        app_name=ray.serve_app_name,
        timeout_s=settings.serving.request_timeout_s,
        max_attempts=ray.grpc_max_attempts,
        batching=BatchingOptions.from_settings(settings.batching),
        replicas=replicas,
        replica_refresh_s=ray.replica_refresh_s,
    )


def _no_client() -> GrpcBackend | None:
    return None


@dataclass(frozen=True)
class BuiltBackend:
    """The backend the settings chose, with what /health and the batching metrics read of it, typed: nothing
    digs through the wrappers for attributes."""

    backend: ClassificationBackend
    kind: Literal["local", "grpc", "ray"]  # the ``backend`` label of the batching metrics and of /health
    batcher: Callable[[], BatchingSource | None]  # in front of the model or the replicas; None while the embedded Ray starts
    grpc_client: Callable[[], GrpcBackend | None] = _no_client  # where calls go: None locally, and while the embedded Ray starts


def build_backend(settings: Settings, *, force_local: bool = False) -> BuiltBackend:
    """local, grpc://HOST:PORT, or ray (embedded Ray Serve reached over gRPC)."""
    backend = settings.serving.backend
    if force_local or backend == "local":
        local = build_local_backend(settings)
        return BuiltBackend(local, "local", lambda: local.batching)
    if backend.startswith("grpc://"):
        remote = build_grpc_backend(settings, backend.removeprefix("grpc://"))
        return BuiltBackend(remote, "grpc", lambda: remote.batching, lambda: remote)
    from .embedder.embedded_backend import EmbeddedRayBackend

    made: list[GrpcBackend] = []  # the embedded node's client, made once Ray is up

    def client_for(target: str) -> GrpcBackend:
        made.append(build_grpc_backend(settings, target, embedded=True))
        return made[-1]

    def client_made() -> GrpcBackend | None:
        return made[-1] if made else None

    def batcher() -> BatchingSource | None:
        started = client_made()
        return started.batching if started is not None else None

    not_started = BackendHealth(ready=False, detail="the embedded Ray node is not started yet")
    return BuiltBackend(EmbeddedRayBackend(settings, client_for, not_started=not_started), "ray", batcher, client_made)


# ---- protocol ------------------------------------------------------------------------------------
def build_past_queries(settings: Settings, link: RedisLink | None) -> PastQueryOptions:
    """Feedback from use, when on: kept in Redis, shared by every gateway, or in this process when there is no Redis."""
    from .cache.tool_feedback import FeedbackVectors

    tools = settings.toolfilter
    if not tools.tool_feedback:
        return PastQueryOptions(None, tools.tool_feedback_weight)
    store = FeedbackVectors(
        link,
        max_vectors=tools.tool_feedback_max_vectors,
        ttl_s=tools.tool_feedback_ttl_s,
        capacity=tools.tool_embedding_cache_entries,
        lists=tools.tool_lexical_indexes,
        refresh_s=tools.tool_feedback_refresh_s,
    )
    return PastQueryOptions(store, tools.tool_feedback_weight)


def build_tool_filter(settings: Settings, backend: ClassificationBackend, link: RedisLink | None = None) -> ToolFilter:
    """The semantic tool filter on the same backend: tool vectors cached in process, and in Redis when there is one."""
    tools, batching = settings.toolfilter, settings.batching
    embeddings = ToolEmbeddings(
        backend,
        link,
        capacity=tools.tool_embedding_cache_entries,
        ttl_s=tools.tool_embedding_ttl_s,
        query_timeout_s=settings.serving.request_timeout_s,
        document_chunk=batching.batch_size,
        lists=tools.tool_lexical_indexes,
    )
    return ToolFilter(
        embeddings,
        max_text_length=settings.serving.max_text_length,
        max_tools=tools.max_tools,
        ranking=tools.tool_ranking,
        lexical_weight=tools.tool_lexical_weight,
        lexical_indexes=tools.tool_lexical_indexes,
        query_clauses=tools.tool_query_clauses,
        default_threshold=tools.tool_threshold if tools.tool_threshold is not None else default_threshold_for(settings.model.name),
        past_queries=build_past_queries(settings, link),
    )


def build_dispatcher(settings: Settings, backend: ClassificationBackend, tool_filter: ToolFilter | None = None) -> McpDispatcher:
    """The MCP methods and tools over ``backend``: one dispatcher for every door (HTTP, stdio)."""
    registry = ToolRegistry()
    serving = settings.serving
    names = tuple(category_sources(settings.categories))
    register_classification_tools(registry, backend, serving.max_text_length, serving.max_batch_texts, names)
    register_tool_filter(registry, tool_filter or build_tool_filter(settings, backend))
    return McpDispatcher(registry, list_ttl_ms=serving.list_ttl_ms)


class Gateway(NamedTuple):
    """What every door serves: the dispatcher, the backend behind it (the caller starts and closes it), the tool filter."""

    dispatcher: McpDispatcher
    backend: ReloadableBackend  # the whole chain, reloads passed down it (hot_reload)
    tool_filter: ToolFilter
    embedder: BuiltBackend  # the backend itself, under any wrapper, with what /health and the metrics read of it
    startup: StartingBackend  # the background start under the wrappers: the doors open before it ends


def build_gateway(
    settings: Settings,
    *,
    force_local: bool = False,
    wrap: Callable[[ReloadableBackend], ReloadableBackend] | None = None,
    link: RedisLink | None = None,
) -> Gateway:
    """Backend (started in the background, optionally wrapped, e.g. by the Redis cache), the tool filter and the
    dispatcher over them."""
    embedder = build_backend(settings, force_local=force_local)
    startup = StartingBackend(embedder.backend, wait_s=settings.serving.request_timeout_s)
    backend: ReloadableBackend = wrap(startup) if wrap is not None else startup
    tool_filter = build_tool_filter(settings, backend, link)
    return Gateway(build_dispatcher(settings, backend, tool_filter), backend, tool_filter, embedder, startup)


# ---- the HTTP app ----------------------------------------------------------------------------------
class EmbedderRoute:
    """/health's ``embedder``: where classification calls go now (the replicas' own servers with direct
    ingress, else the one address), so an operator sees the gateway follow scale-ups and restarts."""

    def __init__(self, built: BuiltBackend) -> None:
        self._built = built

    async def start(self) -> None:
        pass  # nothing to start: the backend is started by the app's lifespan

    async def close(self) -> None:
        pass

    def health(self) -> dict[str, Any]:
        if self._built.kind == "local":
            return {"embedder": {"backend": "local"}}
        client = self._built.grpc_client()
        # No client yet while the embedded Ray starts: no addresses, nothing in flight.
        route = client.describe() if client is not None else {"direct_ingress": False, "addresses": [], "calls_in_flight": {}}
        return {"embedder": {"backend": self._built.kind, **route}}


def watch_batching(metrics: GatewayMetrics, embedder: BuiltBackend) -> None:
    """Queue depth and batch sizes of the batcher in front of the model (local) or of the calls to the replicas."""
    metrics.batching.watch(embedder.kind, embedder.batcher)


class HttpDoors(NamedTuple):
    """What the HTTP doors are built from, without FastAPI: ready before the port is bound, so the handshake
    answers from the start (transports.opening), and shared by the full app built after the bind."""

    edge: EdgeGuard
    gateway: Gateway
    services: list[object]
    late_services: list[object]


def build_http_doors(
    settings: Settings, redis: RedisRuntime, metrics: GatewayMetrics, *, tracing: bool, extra_services: Sequence[object] = ()
) -> HttpDoors:
    """The edge guard, the gateway (dispatcher, cached backend, tool filter) and the services the lifecycle starts.
    ``extra_services`` start with the app and add to /health (a gateway worker's identity)."""
    from .backend.answer_counts import AnswerCounts
    from .edge import build_edge_guard
    from .transports.route_labels import route_label

    edge = build_edge_guard(
        settings.edge, metrics, host=settings.serving.host, link=redis.link, redis_metrics=redis.metrics, route_label=route_label
    )
    gateway = build_gateway(settings, wrap=lambda backend: AnswerCounts(redis.wrap_backend(backend), metrics), link=redis.link)
    gateway.dispatcher.method_observer = metrics.observe_method
    services: list[object] = [edge.keys, gateway.tool_filter.embeddings, EmbedderRoute(gateway.embedder), *extra_services]
    if gateway.tool_filter.past_queries.store is not None:
        services.append(gateway.tool_filter.past_queries.store)  # its background reads end with the app; /health shows it
    watch_batching(metrics, gateway.embedder)
    serving, watched = settings.serving, reloadable_sources(settings.categories)
    if watched:
        from .hot_reload import HotReload

        services.append(HotReload(gateway.backend, watched))
    late_services: list[object] = []
    if serving.grpc_port is not None:
        from .transports.grpc_public import PublicGrpcServer

        late_services.append(
            PublicGrpcServer(
                gateway.dispatcher,
                edge.keys,
                host=serving.host,
                port=serving.grpc_port,
                reflection=serving.grpc_reflection,
                tracing=tracing,
                metrics=metrics,
                max_connection_age_s=serving.grpc_max_connection_age_s,
                max_connection_age_grace_s=serving.grpc_max_connection_age_grace_s,
            )
        )
    return HttpDoors(edge, gateway, services, late_services)


def build_handshake_door(settings: Settings, doors: HttpDoors, metrics: GatewayMetrics) -> ASGIApp:
    """`POST /mcp` for the handshake while the full app loads, behind the same middlewares as the full app's route."""
    from .edge import EdgeMiddleware
    from .transports.correlated import CorrelationMiddleware
    from .transports.mcp_paths import McpPathMiddleware
    from .transports.opening import HandshakeDoor

    door = HandshakeDoor(doors.gateway.dispatcher, metrics.observe)
    return McpPathMiddleware(CorrelationMiddleware(EdgeMiddleware(door, guard=doors.edge), observer=metrics.observe_door))


def build_embeddings_options(settings: Settings) -> EmbeddingsOptions:
    """What /v1/embeddings is given: the model setting's name (accepted as ``model``), the inputs per call
    (max_batch_texts, as classify_batch), the tokens per input, and the Matryoshka sizes a model directory declares."""
    from .engine.matryoshka import declared_matryoshka
    from .transports.openai_embeddings import EmbeddingsOptions

    model = settings.model
    model_dir = Path(model.name)
    return EmbeddingsOptions(
        model_name=model.name,
        max_inputs=settings.serving.max_batch_texts,
        max_seq_length=model.max_seq_length,
        matryoshka=declared_matryoshka(model_dir) if model_dir.is_dir() else None,
    )


def build_http_app(
    settings: Settings, redis: RedisRuntime, metrics: GatewayMetrics, doors: HttpDoors, lifecycle: DoorLifecycle, *, tracing: bool
) -> FastAPI:
    """The whole `serve` app over ``doors`` (built before the bind): its routes, the legacy SSE sessions shared
    through Redis, tracing. ``lifecycle`` (serving.lifecycle) starts and stops what the doors serve."""
    from .transports.http import HttpDoorParts, create_app
    from .transports.sse import local_sessions

    serving, gateway = settings.serving, doors.gateway
    parts = HttpDoorParts(
        dispatcher=gateway.dispatcher,
        backend=gateway.backend,
        lifecycle=lifecycle,
        metrics=metrics,
        sse_sessions=local_sessions(serving, metrics, serving.max_body_bytes, redis.link),
        max_body_bytes=serving.max_body_bytes,
        max_text_length=serving.max_text_length,
        max_batch_texts=serving.max_batch_texts,
        edge=doors.edge,
        tool_filter=gateway.tool_filter,
        embeddings=build_embeddings_options(settings),
    )
    app = create_app(parts)
    if tracing:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, excluded_urls="health,ready,metrics")
    return app
