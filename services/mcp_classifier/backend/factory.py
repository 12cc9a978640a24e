"""Builds the backend that settings ask for."""

from __future__ import annotations

from ..core.categories import load_categories
from ..core.classifier import Classifier
from ..core.encoder import TextEncoder
from ..settings import Settings
from .local import LocalBatchingBackend


def build_classifier(settings: Settings) -> Classifier:
    """Load the model and build the category index (slow: seconds). Runs wherever the model lives."""
    import torch

    if settings.torch_threads:
        torch.set_num_threads(settings.torch_threads)
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
    )
    return Classifier(encoder, config)


def build_local_backend(settings: Settings) -> LocalBatchingBackend:
    return LocalBatchingBackend(
        lambda: build_classifier(settings),
        batch_size=settings.batch_size,
        batch_window_ms=settings.batch_window_ms,
        max_queue=settings.max_queue,
        request_timeout_s=settings.request_timeout_s,
    )
