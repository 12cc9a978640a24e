"""Every backend's batcher shows its queue depth and batch sizes on the gateway's /metrics.

The coalescer keeps plain counts; the gateway's collector reads them at scrape time, so the backend
needs no metrics library. The batch function is an async stand-in for the model, held on a gate so
requests are seen waiting.
"""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families

from mcp_classifier.backend.coalescer import RequestCoalescer
from mcp_classifier.embedder.embedded_backend import EmbeddedRayBackend
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.util.batch_sizes import BatchSizes
from mcp_classifier.wiring import build_backend, watch_batching

WAITING_REQUESTS = 3
LONG_WINDOW_MS = 1000.0  # the queued requests wait in the queue, not for a window: the model is busy


def samples(metrics: GatewayMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    families = text_string_to_metric_families(metrics.render().decode())
    return {tuple(sorted(s.labels.items())): s.value for f in families for s in f.samples if s.name == name}


def test_batch_sizes_fill_cumulative_buckets() -> None:
    sizes = BatchSizes(bounds=(1, 4))
    for size in (1, 3, 4, 9):
        sizes.observe(size)
    assert sizes.cumulative() == [(1.0, 1), (4.0, 3), (float("inf"), 4)]
    assert (sizes.batches, sizes.total_texts) == (4, 17)


def test_the_coalescers_queue_depth_and_batch_sizes_reach_the_gateways_metrics() -> None:
    metrics = GatewayMetrics()

    async def run() -> tuple[int, int]:
        gate = asyncio.Event()

        async def model_stand_in(texts: list[str], _contexts: list) -> list[str]:
            await gate.wait()
            return texts

        coalescer: RequestCoalescer[str, str] = RequestCoalescer(
            model_stand_in, batch_size=8, batch_window_ms=LONG_WINDOW_MS, max_queue=16, request_timeout_s=10
        )
        metrics.batching.watch("local", lambda: coalescer)
        coalescer.start()
        try:
            first = asyncio.create_task(coalescer.submit(["a"]))
            await asyncio.sleep(0.01)  # the first batch is with the model, held at the gate
            waiting = [asyncio.create_task(coalescer.submit([f"t{i}"])) for i in range(WAITING_REQUESTS)]
            await asyncio.sleep(0.01)
            depth_while_busy = coalescer.queue_depth
            scraped = samples(metrics, "mcp_classifier_backend_queue_depth")[(("backend", "local"),)]
            gate.set()
            await asyncio.gather(first, *waiting)
            return depth_while_busy, int(scraped)
        finally:
            await coalescer.close()

    depth_while_busy, scraped = asyncio.run(run())
    assert depth_while_busy == scraped == WAITING_REQUESTS
    local = (("backend", "local"),)
    assert samples(metrics, "mcp_classifier_backend_queue_depth")[local] == 0
    assert samples(metrics, "mcp_classifier_backend_batch_size_count")[local] == 2
    assert samples(metrics, "mcp_classifier_backend_batch_size_sum")[local] == 1 + WAITING_REQUESTS
    buckets = samples(metrics, "mcp_classifier_backend_batch_size_bucket")
    assert buckets[(("backend", "local"), ("le", "1.0"))] == 1
    assert buckets[(("backend", "local"), ("le", "4.0"))] == 2 == buckets[(("backend", "local"), ("le", "+Inf"))]


def test_a_backend_without_a_batcher_yet_exports_no_series() -> None:
    metrics = GatewayMetrics()
    embedded_ray_starting = build_backend(Settings(backend="ray"))  # not started: no Ray, no client yet
    watch_batching(metrics, embedded_ray_starting)
    assert samples(metrics, "mcp_classifier_backend_queue_depth") == {}
    exported = metrics.render().decode()
    assert "# TYPE mcp_classifier_backend_batch_size histogram" in exported, "the families are described all the same"


def test_the_embedded_rays_client_is_read_once_it_exists() -> None:
    metrics = GatewayMetrics()
    embedded_ray = build_backend(Settings(backend="ray"))
    watch_batching(metrics, embedded_ray)
    assert samples(metrics, "mcp_classifier_backend_queue_depth") == {}
    assert isinstance(embedded_ray.backend, EmbeddedRayBackend)
    client = embedded_ray.backend._client_factory("127.0.0.1:9")  # what the start makes once Ray is up
    assert embedded_ray.grpc_client() is client
    assert samples(metrics, "mcp_classifier_backend_queue_depth") == {(("backend", "ray"),): 0}
