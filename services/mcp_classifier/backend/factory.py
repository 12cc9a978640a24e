"""Builds the backend that settings ask for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..settings import Settings
from .base import ClassificationBackend

if TYPE_CHECKING:  # the model stack (torch) is imported only where a model is built: the gateway image has none
    from ..core.classifier import Classifier
    from .local import LocalBatchingBackend


def build_classifier(settings: Settings) -> "Classifier":
    """Load the model and build the category index (slow: seconds). Runs wherever the model lives."""
    import torch
    from threadpoolctl import threadpool_limits

    from ..core.categories import load_categories
    from ..core.classifier import Classifier
    from ..core.encoder import TextEncoder

    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
    # numpy's BLAS (OpenBLAS) keeps a thread per core that busy-waits for ~0.1 s after every
    # matmul. The scoring matmuls are tiny, and that spinning thread took most of a core from the
    # model on a 2-core box (32 clients: 236 -> 342 req/s). One BLAS thread, process-wide.
    threadpool_limits(limits=1, user_api="blas")
    config = load_categories(settings.categories_file)
    encoder = TextEncoder(
        settings.model,
        device=settings.device,
        dtype=settings.dtype,
        pooling=settings.pooling,
        query_instruction=settings.query_instruction,
        instruction=config.instruction,
        max_seq_length=settings.max_seq_length,
        batch_size=settings.batch_size,
        forward_overhead_tokens=settings.forward_overhead_tokens,
    )
    return Classifier(encoder, config)


def model_calls_in_flight(settings: Settings) -> int:
    """Batches the in-process backend runs at once: one per model process, else per model thread."""
    return settings.model_processes or settings.model_threads


def fill_local_threading(settings: Settings) -> Settings:
    """Resolve torch_threads left on auto (0) for the in-process backend.

    One model call in flight keeps torch's own default (physical cores, or OMP_NUM_THREADS).
    Several share that budget out, so concurrent calls never oversubscribe the cores: their
    OpenMP threads would wait on each other at every barrier.
    """
    in_flight = model_calls_in_flight(settings)
    if settings.torch_threads or in_flight == 1:
        return settings
    import torch

    return settings.model_copy(update={"torch_threads": max(1, torch.get_num_threads() // in_flight)})


def build_local_backend(settings: Settings) -> "LocalBatchingBackend":
    from .local import LocalBatchingBackend
    from .model_worker import ModelWorker, ProcessModelWorker, ThreadModelWorker

    settings = fill_local_threading(settings)
    worker: ModelWorker
    if settings.model_processes:
        worker = ProcessModelWorker(settings.model_dump_json(), settings.model_processes)
    else:
        worker = ThreadModelWorker(lambda: build_classifier(settings), threads=settings.model_threads)
    return LocalBatchingBackend(
        worker,
        max_concurrent_batches=model_calls_in_flight(settings),
        categories_file=settings.categories_file,
        batch_size=settings.batch_size,
        batch_window_ms=settings.batch_window_ms,
        max_queue=settings.max_queue,
        request_timeout_s=settings.request_timeout_s,
    )


def build_grpc_backend(settings: Settings, target: str):  # type: ignore[no-untyped-def]
    from .grpc_client import GrpcBackend

    return GrpcBackend(
        target,
        app_name=settings.serve_app_name,
        timeout_s=settings.request_timeout_s,
        max_attempts=settings.grpc_max_attempts,
        batch_size=settings.batch_size,
        batch_window_ms=settings.batch_window_ms,
        max_queue=settings.max_queue,
        max_concurrent_batches=settings.max_concurrent_batches,
    )


def build_backend(settings: Settings, *, force_local: bool = False) -> ClassificationBackend:
    """local, grpc://HOST:PORT, or ray (embedded Ray Serve reached over gRPC)."""
    if force_local or settings.backend == "local":
        return build_local_backend(settings)
    if settings.backend.startswith("grpc://"):
        return build_grpc_backend(settings, settings.backend.removeprefix("grpc://"))
    from .ray_embedded import EmbeddedRayBackend

    return EmbeddedRayBackend(settings, lambda target: build_grpc_backend(settings, target))
