"""The check every speed-up goes through: kept only where the embeddings it gives are the eager model's.

Written once for all of them, so each is held to the same standard: the probe texts embedded each
alone, padded and eager, before the change; the change; the probe again through it; the change
undone where the lowest cosine falls under the tolerance or a step fails (a compile without a C
compiler or Triton, a capture that meets a host sync, a fused layer a whole forward rejects). The
model then serves as it did, a little slower, and a log line says why.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

from .base import Encoder, SpeedUp

log = logging.getLogger(__name__)

# What a step of a speed-up raises where the host cannot run it: torch.compile without a C compiler
# or Triton, or on an op it cannot trace; a CUDA capture that meets a host sync or runs out of memory.
CHECK_FAILURES = (RuntimeError, OSError, ImportError)


def lowest_cosine(vectors: np.ndarray, reference: np.ndarray) -> float:
    """The worst agreement between two sets of unit vectors, row by row."""
    return float(np.min(np.sum(vectors * reference, axis=1)))


def apply_checked(encoder: Encoder, speed_up: SpeedUp, probe_texts: Sequence[str], tolerance: float) -> int:
    """Apply ``speed_up`` where the probe's embeddings keep a cosine of ``tolerance`` with the eager ones.

    Returns what it changed (as ``apply`` counts), 0 where it is off: nothing to apply, other
    embeddings, or a step that failed.
    """
    reference = encoder.embed_alone(probe_texts)
    started = time.perf_counter()
    try:
        changed = speed_up.apply(encoder)
        if not changed:
            return 0
        agreement = lowest_cosine(speed_up.embed(encoder, probe_texts), reference)
        if agreement >= tolerance:
            speed_up.settle(encoder)
    except CHECK_FAILURES as exc:
        undo(encoder, speed_up)
        log.warning("%s are off: %s failed (%s: %s)", speed_up.name, speed_up.trial, type(exc).__name__, exc)
        return 0
    if not agreement >= tolerance:  # NaN included
        undo(encoder, speed_up)
        log.warning("%s are off: embeddings with them differ from the model's own (cosine %.4f)", speed_up.name, agreement)
        return 0
    encoder.applied[speed_up.name] = changed
    log.debug(
        "%s; embeddings agree with the model's own (cosine %.6f), applied and checked in %.1f s",
        speed_up.describe(encoder, changed),
        agreement,
        time.perf_counter() - started,
    )
    return changed


def apply_known(encoder: Encoder, speed_up: SpeedUp) -> int:
    """Apply a speed-up that an earlier load of this model on this host checked (engine.probe_cache): no comparison."""
    try:
        changed = speed_up.apply(encoder)
        if changed:
            speed_up.settle(encoder)
    except CHECK_FAILURES as exc:
        undo(encoder, speed_up)
        log.warning("%s are off: %s failed (%s: %s)", speed_up.name, speed_up.trial, type(exc).__name__, exc)
        return 0
    if changed:
        encoder.applied[speed_up.name] = changed
        log.debug("%s; checked against the model's own at an earlier start", speed_up.describe(encoder, changed))
    return changed


def undo(encoder: Encoder, speed_up: SpeedUp) -> None:
    """The model's own route back, and the encoder's record of the speed-up cleared."""
    speed_up.undo(encoder)
    encoder.applied.pop(speed_up.name, None)
