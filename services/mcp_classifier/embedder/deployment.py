"""The Ray Serve deployment: gRPC methods Classify/Info around the classifier core, batched with @serve.batch."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import torch
from opentelemetry import trace
from opentelemetry.propagate import extract
from ray import serve
from ray.serve.metrics import Gauge, Histogram

from .. import __version__
from ..api.convert import info_to_proto, results_to_proto, vectors_to_bytes
from ..api.v1 import classifier_pb2 as pb
from ..classify.build import build_registry
from ..classify.classifier import ClassificationResult
from ..classify.registry import DEFAULT, ClassifierRegistry, UnknownClassifier
from ..classify.reload_report import FILE_CHANGE, log_reload
from ..engine.encoder import pick_device
from ..engine.tokenizer_threads import tokenizer_threads_in_effect
from ..settings import BatchingSettings, Settings
from ..telemetry import setup_tracing
from ..util.batch_sizes import BATCH_SIZE_BOUNDS
from .cpu_pinning import choose_replica_cores, pin_process
from .serve_config import DEPLOYMENT_NAME, deployment_options, replica_settings

log = logging.getLogger(__name__)
T = TypeVar("T")
M = TypeVar("M", pb.ClassifyResponse, pb.InfoResponse)
TRACER_NAME = "mcp_classifier.embedder"  # the tracer is made per replica: Ray pickles this class by value

WARMUP_TEXTS = ("warm-up query", "a somewhat longer warm-up query so that several sequence lengths get compiled")
BATCH_SIZE_BUCKETS = 64  # BatchStats keeps exact counts for batches of 1..64 texts, larger ones share the last bucket


@dataclass
class _BatchItem:
    texts: list[str]
    classifier: str  # the registry's name for the classifier that answers these texts
    span_context: trace.SpanContext
    slots: int
    enqueued_at: float
    taken: bool = False  # into a batch: no longer counted as queued


# @serve.batch needs its knobs when the class is defined; reconfigure() applies the real ones
# from user_config before the first request. Both start from the settings' defaults.
_DEFAULT_BATCH_SIZE = BatchingSettings().batch_size
_DEFAULT_WAIT_S = BatchingSettings().batch_window_ms / 1000.0


def _item_slots(items: list[_BatchItem]) -> int:
    return sum(item.slots for item in items)


@serve.deployment(name=DEPLOYMENT_NAME)
class Embedder:
    """One replica: loads the model, warms it up (the replica is ready only after), serves batches."""

    def __init__(self, settings: dict[str, Any]) -> None:
        setup_tracing("mcp-classifier-embedder")
        self._tracer = trace.get_tracer(TRACER_NAME)
        self._settings = Settings(**settings)
        self._all_cores = sorted(os.sched_getaffinity(0))  # before pinning: the cores this replica's slice is taken from
        # Before any thread of its own starts: the forward thread, the tokenizer's and OpenMP's inherit it.
        self._pinned_to = self._pin_to_own_cores()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")
        # Built and warmed on the forward thread, the one every batch runs on: OpenMP keeps a thread
        # team per calling thread, and once a second thread has run torch with two or more threads,
        # every forward ran about twice as slow (a lone MiniLM text 10.8 against 5.4 ms).
        self._registry = self._executor.submit(self._build_and_warm).result()
        self._classifier = self._registry.get()  # the same object across reloads: a reload swaps its index in place
        # Read once the model is built (it sized the tokenizer's pool): the forward span reports it, 0 for every CPU.
        self._tokenizer_threads = tokenizer_threads_in_effect() or 0
        self._slot_chars = self._settings.batching.batch_slot_chars
        self._max_batch_size = self._settings.batching.batch_size
        self._stats = pb.BatchStats(batch_size_counts=[0] * BATCH_SIZE_BUCKETS)
        self._reload_generation = 0
        # Each replica watches its own copy of every file (a ConfigMap mount on Kubernetes), so a change reaches
        # every replica even when no gateway asks for it. The watches live as long as the replica's process.
        for name in self._registry.names:
            self._registry.watch(name, functools.partial(self._reload_categories, FILE_CHANGE, (name,)))
        self._batch_sizes = Histogram(
            "mcp_classifier_embedder_batch_size",
            description="Texts per model batch",
            boundaries=list(BATCH_SIZE_BOUNDS),
        )
        self._queued = 0
        self._queue_depth = Gauge("mcp_classifier_embedder_queue_depth", description="Classify calls waiting for a batch")
        self._queue_wait = Histogram(
            "mcp_classifier_embedder_queue_wait_seconds",
            description="Time a request waited for its batch",
            boundaries=[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0],
        )
        self._forward_time = Histogram(
            "mcp_classifier_embedder_forward_seconds",
            description="Model forward time per batch",
            boundaries=[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5],
        )
        log.info("embedder replica ready: %s", self._classifier.info.model_id)

    def _pin_to_own_cores(self) -> list[int] | None:
        """This replica's process onto its slice of the node's cores (embedder/cpu_pinning.py), where that is safe."""
        if pick_device(self._settings.model.device).type != "cpu":
            return None  # a GPU replica's host work (tokenising, packing) spreads over the pod's cores
        import ray

        if not ray.is_initialized():
            # Built outside a Ray worker (in process, as the tests build it): there is no node to share, and asking
            # for the runtime context would start a whole local Ray instance, dashboard included, inside the caller.
            return None
        context = ray.get_runtime_context()
        cores = choose_replica_cores(
            self._settings.ray.replica_cpu_pinning,
            self._all_cores,
            node_cpus=lambda: next(float(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["NodeID"] == context.get_node_id()),
            local_rank=lambda: serve.get_replica_context().rank.local_rank,
            assigned_cpus=lambda: float(context.get_assigned_resources().get("CPU", 0)),
        )
        if cores is not None:
            log.info("replica pinned to cores %s (%d threads)", cores, pin_process(cores))
        return cores

    def _build_and_warm(self) -> ClassifierRegistry:
        registry = build_registry(self._settings)
        registry.get().classify(list(WARMUP_TEXTS))
        return registry

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Hot-updatable knobs from the Serve config's user_config; a new reload_generation re-reads the categories."""
        generation = int(user_config.get("reload_generation", 0))
        if generation != self._reload_generation:
            self._reload_generation = generation
            self._reload_categories(f"reload_generation {generation}")
        self._max_batch_size = int(user_config.get("max_batch_size", self._max_batch_size))
        self._slot_chars = int(user_config.get("batch_slot_chars", self._slot_chars))
        self._classify_batch.set_max_batch_size(self._max_batch_size)
        self._classify_batch.set_batch_wait_timeout_s(float(user_config.get("batch_wait_timeout_s", _DEFAULT_WAIT_S)))

    async def Classify(self, request: pb.ClassifyRequest, grpc_context: Any = None) -> pb.ClassifyResponse:
        metadata = dict(grpc_context.invocation_metadata()) if grpc_context is not None else {}
        with self._tracer.start_as_current_span("embedder Classify", context=extract(metadata), kind=trace.SpanKind.SERVER) as span:
            name = request.classifier or DEFAULT
            if name not in self._registry.names:
                return _not_found(pb.ClassifyResponse(), UnknownClassifier(name, self._registry.names), grpc_context)
            texts = list(request.texts)
            span.set_attribute("mcp_classifier.texts", len(texts))
            span.set_attribute("mcp_classifier.classifier", name)
            slots = sum(max(1, math.ceil(len(t) / self._slot_chars)) for t in texts)
            item = _BatchItem(texts, name, span.get_span_context(), min(slots, self._max_batch_size), time.perf_counter())
            results = await self._queued_for_batch(item) if texts else []
            category_set_version, policy_version = self._registry.versions(name)
            return pb.ClassifyResponse(
                results=results_to_proto(results, request.with_probabilities),
                category_set_version=category_set_version,
                policy_version=policy_version,
                model_id=self._classifier.encoder.model_id,
            )

    async def Embed(self, request: pb.EmbedRequest, grpc_context: Any = None) -> pb.EmbedResponse:
        """One model call on the forward thread (between classify batches): tool lists arrive whole."""
        metadata = dict(grpc_context.invocation_metadata()) if grpc_context is not None else {}
        with self._tracer.start_as_current_span("embedder Embed", context=extract(metadata), kind=trace.SpanKind.SERVER) as span:
            kind = "document" if request.kind == pb.EmbedRequest.DOCUMENT else "query"
            span.set_attribute("mcp_classifier.texts", len(request.texts))
            vectors = await asyncio.get_running_loop().run_in_executor(self._executor, self._classifier.embed, list(request.texts), kind)
            return pb.EmbedResponse(
                vectors=vectors_to_bytes(vectors), dimensions=int(vectors.shape[1]), model_id=self._classifier.encoder.model_id
            )

    async def Info(self, request: pb.InfoRequest, grpc_context: Any = None) -> pb.InfoResponse:
        """One classifier's info (the default's unless named), with the names of every classifier served."""
        name = request.classifier or DEFAULT
        if name not in self._registry.names:
            return _not_found(pb.InfoResponse(), UnknownClassifier(name, self._registry.names), grpc_context)
        message = info_to_proto(self._registry.get(name).info, self._stats)
        message.classifiers.extend(self._registry.names)
        return message

    async def _queued_for_batch(self, item: _BatchItem) -> list[ClassificationResult]:
        """Wait for ``item``'s batch, counted in the queue depth until the batch takes it (or the caller gives up)."""
        self._set_queued(self._queued + 1)
        try:
            return await self._classify_batch(item)
        finally:
            if not item.taken:
                self._set_queued(self._queued - 1)

    def _set_queued(self, queued: int) -> None:
        self._queued = queued
        self._queue_depth.set(queued)

    @serve.batch(max_batch_size=_DEFAULT_BATCH_SIZE, batch_wait_timeout_s=_DEFAULT_WAIT_S, batch_size_fn=_item_slots)
    async def _classify_batch(self, items: list[_BatchItem]) -> list[list[ClassificationResult]]:
        started = time.perf_counter()
        for item in items:
            self._queue_wait.observe(started - item.enqueued_at)
            item.taken = True
        self._set_queued(self._queued - len(items))
        asked = [(item.classifier, t) for item in items for t in item.texts]
        texts = [t for _, t in asked]
        links = [trace.Link(item.span_context) for item in items]
        parent = trace.set_span_in_context(trace.NonRecordingSpan(items[0].span_context))
        with self._tracer.start_as_current_span("embedder batch", context=parent, links=links) as span:
            span.set_attribute("mcp_classifier.batch.requests", len(items))
            span.set_attribute("mcp_classifier.batch.texts", len(texts))
            results = await asyncio.get_running_loop().run_in_executor(self._executor, self._forward, asked, span)
        self._record(len(texts), time.perf_counter() - started)
        out, offset = [], 0
        for item in items:
            out.append(results[offset : offset + len(item.texts)])
            offset += len(item.texts)
        return out

    def _forward(self, asked: list[tuple[str, str]], batch_span: trace.Span) -> list[ClassificationResult]:
        """(classifier, text) pairs in one pass over the model: a text asked of several classifiers is embedded once."""
        with self._tracer.start_as_current_span("embedder forward", context=trace.set_span_in_context(batch_span)) as span:
            span.set_attribute("mcp_classifier.batch_size", len(asked))
            span.set_attribute("mcp_classifier.torch_threads", torch.get_num_threads())
            span.set_attribute("mcp_classifier.tokenizer_threads", self._tokenizer_threads)
            span.set_attribute("mcp_classifier.replica_cores", self._pinned_to or [])  # empty: not pinned
            span.set_attribute("mcp_classifier.fp16_weights_max_tokens", self._classifier.encoder.fp16_weights_max_tokens)
            results = self._registry.classify(asked)
            span.set_attribute("mcp_classifier.tokens", self._classifier.encoder.last_batch_tokens)
            span.set_attribute("mcp_classifier.model_calls", self._classifier.encoder.last_forward_calls)
            span.set_attribute("mcp_classifier.packed", self._classifier.encoder.last_batch_packed)
            return results

    def _reload_categories(self, trigger: str = FILE_CHANGE, names: tuple[str, ...] | None = None) -> None:
        """Re-read ``names``' files (every classifier's where None), each reported on its own."""
        for name in names if names is not None else self._registry.names:
            if not self._registry.source(name).reloadable:
                continue
            classifier = self._registry.get(name)
            # On the forward thread: the swap happens between batches, never inside one.
            refused_before = classifier.info.reload_error is not None
            reloaded = self._executor.submit(self._registry.reload, name).result()
            said = trigger if name == DEFAULT else f"{trigger}, classifier {name}"
            log_reload(log, said, reloaded.changed, classifier.info, refused_before=refused_before)

    def _record(self, n_texts: int, seconds: float) -> None:
        self._batch_sizes.observe(n_texts)
        self._forward_time.observe(seconds)
        self._stats.batches += 1
        self._stats.texts += n_texts
        self._stats.largest_batch = max(self._stats.largest_batch, n_texts)
        self._stats.batch_size_counts[min(n_texts, BATCH_SIZE_BUCKETS) - 1] += 1


def _not_found(empty: M, error: UnknownClassifier, grpc_context: Any) -> M:
    """An unknown classifier name: NOT_FOUND with the names served (the gateway's client raises UnknownClassifier)."""
    if grpc_context is None:
        raise error
    grpc_context.set_code(grpc.StatusCode.NOT_FOUND)
    grpc_context.set_details(str(error))
    return empty


def build_app(args: dict[str, Any]) -> serve.Application:
    """Serve config import_path target: args = {"settings": {...replica settings...}}."""
    return Embedder.bind(args.get("settings", {}))  # type: ignore[attr-defined]  # bind() comes from @serve.deployment


def build_app_with_options(settings: Settings, reload_generation: int = 0) -> serve.Application:
    """The embedded path: the same deployment options and replica settings the Serve config carries, applied directly.

    serve.run from a driver gives a deployment without a version a random one on every run, so each
    categories reload restarted every replica. The version here is derived from everything the replicas
    are built from except user_config: a reload (a new reload_generation) then reconfigures the running
    replicas in place, as a Serve config deploy does on Kubernetes, and any other change restarts them.
    """
    options = deployment_options(settings.ray, settings.batching)
    built_from = {
        "package": __version__,
        "settings": replica_settings(settings),
        **{k: v for k, v in options.items() if k != "user_config"},
    }
    version = hashlib.sha256(json.dumps(built_from, sort_keys=True, default=str).encode()).hexdigest()[:16]
    options["user_config"] = {**options["user_config"], "reload_generation": reload_generation}
    deployment = Embedder.options(**options)  # type: ignore[attr-defined]  # from @serve.deployment
    # Serve's public options() refuses `version` ("managed internally"); its internal form sets only that field.
    return deployment.options(version=version, _internal=True).bind(replica_settings(settings))
