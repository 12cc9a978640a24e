"""Gateway backend over gRPC to the embedder: deadlines, retries, coalesced calls.

It calls one address (Serve's gRPC proxy), or, when handed a replica source, the replicas' own gRPC
servers (Serve direct ingress): each call to the replica with the fewest calls in flight (replica_pool),
failed over to another when one is unreachable, and the list followed as it changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc
import numpy as np
from opentelemetry import context as otel_context
from opentelemetry import trace
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from ..api.convert import info_from_proto, results_from_proto, vectors_from_bytes
from ..api.v1 import classifier_pb2 as pb
from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult, ClassifierInfo
from .base import BackendError, BackendHealth, BackendOverloaded, BackendTimeout, BackendUnavailable, EmbeddingKind
from .coalescer import BatchingOptions, RequestCoalescer
from .embed_batching import SmallEmbeddingBatcher
from .replica_pool import Replica, ReplicaPool

log = logging.getLogger(__name__)
tracer = trace.get_tracer("mcp_classifier.gateway")

SERVICE_NAME = "mcp_classifier.api.v1.Classifier"
READY_PROBE_TIMEOUT_S = 1.0
READY_CACHE_S = 0.5  # /ready may be polled often: reuse a fresh probe result
MIN_ATTEMPT_TIMEOUT_S = 0.001  # a retry that starts at the deadline still gets a deadline, and fails DEADLINE_EXCEEDED
INFO_CACHE_S = 5.0  # list_categories and /health read this; a version change in Classify refreshes it early
NOT_PROBED = "the embedder has not been probed yet"

ReplicaSource = Callable[[], Awaitable[Sequence[str]]]


RETRYABLE_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)


def channel_options(max_attempts: int) -> list[tuple[str, object]]:
    """Retries on one address are gRPC's own (service-config retry policy), not a hand-written loop;
    ``max_attempts`` below 2 leaves them out (the replica pool's calls fail over to another replica instead)."""
    retries: list[tuple[str, object]] = []
    if max_attempts >= 2:
        retry_policy = {
            "maxAttempts": max_attempts,
            "initialBackoff": "0.05s",
            "maxBackoff": "1s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": [code.name for code in RETRYABLE_CODES],
        }
        service_config = {"methodConfig": [{"name": [{"service": SERVICE_NAME}], "retryPolicy": retry_policy}]}
        retries = [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(service_config))]
    return retries + [
        # Reconnect quickly after the embedder comes back, instead of gRPC's default of up to 2 minutes.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2000),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ]


_REPLICA_DIED = re.compile(r"actor died|actordied|actor is unavailable|actorunavailable", re.IGNORECASE)


def replica_died(exc: BaseException) -> bool:
    """Serve's proxy answers INTERNAL "The actor died unexpectedly..." when the replica serving a call is killed.

    gRPC's own retry policy cannot take these: the proxy has already sent its response headers, so the
    call counts as committed. The classify and embed calls are idempotent, so the gateway retries them.
    """
    return (
        isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.INTERNAL and bool(_REPLICA_DIED.search(exc.details() or ""))
    )


def backend_error(exc: grpc.aio.AioRpcError) -> BackendError:
    code = exc.code()
    details = exc.details() or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        return BackendUnavailable(f"embedder unreachable: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return BackendTimeout(f"embedder did not answer in time: {details}")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return BackendOverloaded(f"embedder overloaded: {details}")
    return BackendError(f"embedder error {code.name}: {details}")


class GrpcBackend:
    def __init__(
        self,
        target: str,
        *,
        app_name: str,
        timeout_s: float,
        max_attempts: int,
        batching: BatchingOptions,
        replicas: ReplicaSource | None = None,
        replica_refresh_s: float = 2.0,
    ) -> None:
        self.target = target
        self._replicas = replicas
        self._replica_refresh_s = replica_refresh_s
        self._follower: asyncio.Task[None] | None = None
        self._metadata = (("application", app_name),)
        self._timeout_s = timeout_s
        self._max_attempts = max_attempts
        # Following replicas, a failed call moves to another replica (_call); on one fixed address gRPC retries it.
        channel_attempts = 1 if replicas is not None else max_attempts
        self._pool = ReplicaPool(lambda address: grpc.aio.insecure_channel(address, options=channel_options(channel_attempts)), timeout_s)
        self._info: tuple[float, dict[str, ClassifierInfo]] | None = None  # (when, each classifier's info, default first)
        self._ready: tuple[float, bool, str | None] = (0.0, False, NOT_PROBED)  # (when, verdict, why not)
        self._coalescer = RequestCoalescer.from_options(self._predict_batch, batching, request_timeout_s=timeout_s)
        self._small_embeddings = SmallEmbeddingBatcher(self._embed_call, batching, request_timeout_s=timeout_s)  # one Embed RPC

    @property
    def batching(self) -> RequestCoalescer[tuple[str, str], ClassificationResult]:
        """The batcher that turns many requests into Classify calls, one per classifier in a batch: exported like the
        local backend's, whose (classifier, text) pairs it shares."""
        return self._coalescer

    async def start(self) -> None:
        addresses = await self._discover() if self._replicas is not None else []
        self._pool.use(addresses or [self.target])
        log.info("calling the embedder at %s", ", ".join(self._pool.addresses))
        if self._replicas is not None:
            self._follower = asyncio.create_task(self._follow_replicas(), name="grpc-replica-follower")
        self._coalescer.start()
        self._small_embeddings.start()

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        await self._coalescer.close()
        await self._small_embeddings.close()
        await self._pool.close()

    @property
    def follows_replicas(self) -> bool:
        """True when calls go to the replicas Serve lists (direct ingress), not to one fixed address."""
        return self._replicas is not None

    @property
    def addresses(self) -> tuple[str, ...]:
        """Where calls go now: the replicas' own servers, or the one target it was given."""
        return self._pool.addresses

    @property
    def calls_in_flight(self) -> dict[str, int]:
        return self._pool.calls_in_flight

    def describe(self) -> dict[str, Any]:
        """/health's view of where calls go: direct ingress or not, the addresses, the calls in flight on each."""
        return {"direct_ingress": self.follows_replicas, "addresses": list(self.addresses), "calls_in_flight": dict(self.calls_in_flight)}

    async def _discover(self) -> list[str]:
        assert self._replicas is not None
        try:
            # Bounded: a hung Serve controller or REST API must not stop the gateway following later changes.
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result when the listing completes
            # just as close() cancels the follower, swallowing the cancel, and close() then waited forever.
            async with asyncio.timeout(max(self._replica_refresh_s, READY_PROBE_TIMEOUT_S)):
                return sorted(await self._replicas())
        except Exception as exc:  # noqa: BLE001 - the list is a hint: keep calling the replicas already known
            log.warning("could not list the embedder replicas: %s", exc)
            return []

    async def _follow_replicas(self) -> None:
        """Replicas come and go (autoscaling, a restart after a crash): follow Serve's list."""
        while True:
            await asyncio.sleep(self._replica_refresh_s)
            addresses = await self._discover()
            if addresses and tuple(addresses) != self._pool.addresses:
                log.info("embedder replicas now at %s", ", ".join(addresses))
                self._pool.use(addresses)

    def _pick(self, avoid: Sequence[str] = ()) -> Replica:
        try:
            return self._pool.pick(avoid)
        except LookupError:
            raise BackendUnavailable("the gRPC backend is not started") from None

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        """A name the replicas do not serve is refused before it joins a batch (their names, cached with the info)."""
        if classifier != DEFAULT:
            known = await self._current_info()
            if classifier not in known:
                raise UnknownClassifier(classifier, tuple(known))
        if not texts:
            return []
        return await self._coalescer.submit([(classifier, text) for text in texts])

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        """A few texts join other callers' in one Embed RPC (embed_batching); a long list is one RPC of its own. The
        replica runs each RPC as one model call."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if self._small_embeddings.takes(texts):
            return await self._small_embeddings.embed(texts, kind)
        return await self._embed_call(list(texts), kind)

    async def _embed_call(self, texts: list[str], kind: EmbeddingKind) -> np.ndarray:
        request = pb.EmbedRequest(texts=list(texts), kind=pb.EmbedRequest.DOCUMENT if kind == "document" else pb.EmbedRequest.QUERY)
        with tracer.start_as_current_span("gateway embed call") as span:
            span.set_attribute("mcp_classifier.texts", len(texts))
            response = await self._call("Embed", request)
        return vectors_from_bytes(response.vectors, len(texts), response.dimensions)

    def _retryable(self, exc: BaseException) -> bool:
        """A dead replica behind the proxy always; following replicas, also one unreachable or full (another may not be)."""
        if replica_died(exc):
            return True
        return self.follows_replicas and isinstance(exc, grpc.aio.AioRpcError) and exc.code() in RETRYABLE_CODES

    async def _call(self, method: str, request: Any) -> Any:
        """One RPC within the request deadline, on the least busy replica, retried on another if that one fails."""
        deadline = time.monotonic() + self._timeout_s
        tried: list[str] = []
        retrying = AsyncRetrying(
            retry=retry_if_exception(self._retryable),
            stop=stop_after_attempt(self._max_attempts) | stop_after_delay(self._timeout_s),
            wait=wait_exponential(multiplier=0.05, max=1.0),
            reraise=True,
        )

        async def attempt() -> Any:
            replica = self._pick(tried)
            tried.append(replica.address)
            with self._pool.calling(replica):
                rpc = getattr(replica.stub, method)
                return await rpc(request, timeout=max(deadline - time.monotonic(), MIN_ATTEMPT_TIMEOUT_S), metadata=self._metadata)

        try:
            return await retrying(attempt)
        except grpc.aio.AioRpcError as exc:
            raise backend_error(exc) from exc

    async def info_message(self, timeout_s: float | None = None, classifier: str = DEFAULT) -> pb.InfoResponse:
        """One classifier's Info (the default's unless named); its ``classifiers`` lists every name served."""
        request = pb.InfoRequest(classifier="" if classifier == DEFAULT else classifier)
        try:
            return await self._pick().stub.Info(request, timeout=timeout_s or self._timeout_s, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise backend_error(exc) from exc

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        """Two costs kept apart: a probe is one Info RPC bounded by READY_PROBE_TIMEOUT_S and reused for READY_CACHE_S
        (/ready may be polled often), with the info only if still fresh; ``need_info`` sends no probe (``ready`` is the
        last probe's verdict) and reads the info, cached for INFO_CACHE_S and fetched within the request deadline
        (list_categories, /health, the cache's keys)."""
        if need_info:
            try:
                infos = await self._current_info()
            except BackendError as exc:
                return BackendHealth.failed(exc, ready=self._ready[1])
            return _health(self._ready[1], infos)
        ready, why = await self._probe()
        return _health(ready, self._fresh_info(), why)

    def _fresh_info(self) -> dict[str, ClassifierInfo] | None:
        if self._info is None or time.monotonic() - self._info[0] > INFO_CACHE_S:
            return None
        return self._info[1]

    async def _current_info(self) -> dict[str, ClassifierInfo]:
        """Each classifier's info by name, the default's first: one Info call, and one more per named classifier."""
        infos = self._fresh_info()
        if infos is None:
            now = time.monotonic()
            default = await self.info_message()
            named = [name for name in default.classifiers if name != DEFAULT]
            messages = await asyncio.gather(*(self.info_message(classifier=name) for name in named))
            infos = {DEFAULT: info_from_proto(default), **{name: info_from_proto(m) for name, m in zip(named, messages, strict=True)}}
            self._info = (now, infos)
        return infos

    async def _probe(self) -> tuple[bool, str | None]:
        """Whether the embedder answers an Info call now: (verdict, why not), reused for READY_CACHE_S."""
        if time.monotonic() - self._ready[0] > READY_CACHE_S:
            try:
                await self.info_message(READY_PROBE_TIMEOUT_S)
                ok, why = True, None
            except BackendError as exc:
                ok, why = False, str(exc)
            self._ready = (time.monotonic(), ok, why)
        return self._ready[1], self._ready[2]

    async def reload_categories(self) -> bool:
        """Reloadable: replicas reload their own file (watch or user_config); here only the cached Info is dropped."""
        before = _versions(self._info[1]) if self._info else None
        self._info = None
        return before is not None and _versions(await self._current_info()) != before

    async def wait_until_ready(self, timeout_s: float) -> None:
        """Poll readiness until the embedder answers (it may still be loading its model)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (await self.health()).ready:
                return
            await asyncio.sleep(0.2)
        raise BackendUnavailable(f"embedder at {self.target} not reachable after {timeout_s:g} s")

    async def _predict_batch(self, asked: list[tuple[str, str]], contexts: list[otel_context.Context]) -> list[ClassificationResult]:
        """(classifier, text) pairs -> one Classify call per classifier in the batch (all at once), results in order."""
        # The call runs in the first caller's trace and links the others, so every request's
        # trace reaches the replica (the gRPC instrumentation injects traceparent from this span).
        links = [trace.Link(trace.get_current_span(c).get_span_context()) for c in contexts[1:]]
        by_name: dict[str, list[int]] = {}
        for position, (name, _) in enumerate(asked):
            by_name.setdefault(name, []).append(position)
        with tracer.start_as_current_span("gateway embedder call", context=contexts[0], links=links) as span:
            span.set_attribute("mcp_classifier.batch.texts", len(asked))
            span.set_attribute("mcp_classifier.batch.requests", len(contexts))
            answers = await asyncio.gather(*(self._classify(name, [asked[i][1] for i in at]) for name, at in by_name.items()))
        results: list[ClassificationResult | None] = [None] * len(asked)
        for at, answered in zip(by_name.values(), answers, strict=True):
            for position, result in zip(at, answered, strict=True):
                results[position] = result
        return [result for result in results if result is not None]

    async def _classify(self, classifier: str, texts: list[str]) -> list[ClassificationResult]:
        """One Classify call for one classifier's texts; a new version in the answer drops the cached info."""
        request = pb.ClassifyRequest(texts=texts, with_probabilities=True, classifier="" if classifier == DEFAULT else classifier)
        response = await self._call("Classify", request)
        cached = self._info[1].get(classifier) if self._info is not None else None
        if cached is not None and response.category_set_version != cached.category_set_version:
            self._info = None  # the replicas reloaded their categories: refresh list_categories now
        return results_from_proto(response.results)


def _health(ready: bool, infos: dict[str, ClassifierInfo] | None, detail: str | None = None) -> BackendHealth:
    """The default's info at the top; every classifier listed only where the replicas serve more than it."""
    if infos is None:
        return BackendHealth(ready=ready, detail=detail)
    return BackendHealth(ready=ready, info=infos[DEFAULT], detail=detail, classifiers=infos if len(infos) > 1 else {})


def _versions(infos: dict[str, ClassifierInfo]) -> dict[str, tuple[str, str]]:
    return {name: (info.category_set_version, info.policy_version) for name, info in infos.items()}
