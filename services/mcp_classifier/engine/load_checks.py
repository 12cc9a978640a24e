"""The load-time checks, run once on a loaded encoder, in order: each speed-up asked for, checked against the eager
model (accel), a forward's fixed cost, and whether packed rows give the padded embeddings.

The order matters: the speed-ups that change the model's kernels first, so the forward's measured
cost is theirs; then the cost and the packing check, which settle the batch plan and the pack width;
then the speed-ups that serve that plan (fp16 weights, CUDA graphs). An earlier start of the same
model on this host may have answered the checks already (probe_cache): a speed-up found off then
stays off, one found on is applied again unchecked. The forward's cost is always measured: a timing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from .accel import CALL_SPEED_UPS, MODEL_SPEED_UPS, SpeedUp
from .accel.verify import apply_checked, apply_known, lowest_cosine
from .probe_cache import PROBES_FORMAT, ProbeCache, ProbeResults, device_identity
from .signature import model_signature

if TYPE_CHECKING:
    from .encoder import TextEncoder

log = logging.getLogger(__name__)

# Packed and padded embeddings of one text differ only by float rounding (bf16 on a GPU included).
PACKING_MIN_COSINE = 0.999

# Texts of several lengths sharing packed rows: a text that saw its neighbours, or a wrong position, shows.
PROBE_TEXTS = [f"probe {'word ' * n}for packing" for n in (1, 3, 7, 12, 2, 5)]


def run_load_checks(encoder: TextEncoder) -> None:
    """Settle the speed-ups, the forward's cost and the pack width on a freshly loaded encoder."""
    options = encoder.options
    probes = probe_cache(encoder)
    known = probes.load() if probes is not None else None
    apply_wanted(encoder, MODEL_SPEED_UPS, known)  # first: the forward's cost, measured next, is their kernels'
    # How costly a model call is next to padding: decides how a mixed batch is split (batch_plan).
    encoder.forward_overhead_tokens = options.forward_overhead_tokens or encoder.measure_forward_overhead()
    log.debug("one forward costs about as much as %.0f tokens of padding", encoder.forward_overhead_tokens)
    packing_agrees = bool(options.pack_width) and (known.packing_agrees if known is not None else packing_matches_padding(encoder))
    encoder.pack_width = options.pack_width if packing_agrees else 0
    if encoder.pack_width:
        log.debug("texts are packed into rows of about %d tokens (packed and padded embeddings agree)", encoder.pack_width)
    apply_wanted(encoder, CALL_SPEED_UPS, known)  # last: they serve the batch plan and the pack width
    if probes is not None and known is None:
        wanted = [s.name for s in (*MODEL_SPEED_UPS, *CALL_SPEED_UPS) if s.wanted(encoder.device, encoder.options)]
        probes.store(ProbeResults(packing_agrees, {name: encoder.applied.get(name, 0) for name in wanted}))
    elif probes is not None:
        log.debug("load-time checks: the answers of an earlier start of this model here (%s)", probes.path)


def probe_cache(encoder: TextEncoder) -> ProbeCache | None:
    """Where the load-time checks' answers are kept for this model, device, dtype and options; None: off or no files."""
    if encoder.options.probe_cache_dir is None:
        return None
    described = (
        f"probes={PROBES_FORMAT}",
        encoder.model_id,
        device_identity(encoder.device),
        encoder.dtype,
        encoder.pooling,
        encoder.max_seq_length,
        encoder.feature_layers,
        encoder.query_prefix,  # the probe texts are queries
        replace(encoder.options, probe_cache_dir=None),
    )
    signature = model_signature(encoder.model_dir, described)
    return ProbeCache(encoder.options.probe_cache_dir, signature) if signature else None


def apply_wanted(encoder: TextEncoder, speed_ups: Sequence[SpeedUp], known: ProbeResults | None = None) -> None:
    """Each speed-up the options ask for, checked; or as ``known`` found it: off stays off, on is applied unchecked."""
    for speed_up in speed_ups:
        if not speed_up.wanted(encoder.device, encoder.options):
            continue
        found = known.speed_ups.get(speed_up.name) if known is not None else None
        if found is None:
            encoder.apply_speed_up(speed_up)
        elif found:
            apply_known(encoder, speed_up)


def apply_speed_up(encoder: TextEncoder, speed_up: SpeedUp) -> int:
    """Apply a speed-up where the probe's embeddings stay the eager model's; what it changed, 0 where it is off."""
    return apply_checked(encoder, speed_up, [encoder.format_query(t) for t in PROBE_TEXTS], PACKING_MIN_COSINE)


def packing_matches_padding(encoder: TextEncoder) -> bool:
    """Whether packed rows give this model's padded embeddings: position ids and a 4-D mask must both be honoured.

    Some architectures ignore one or the other (learned absolute positions read from a buffer,
    a mask rebuilt from scratch); for them packing would silently change every embedding, so it
    stays off. Probe texts of several lengths share rows, so a text that saw its neighbours shows.
    """
    ids = encoder.tokens.tokenize(PROBE_TEXTS)["input_ids"]
    try:
        packed = encoder.encode_packed(ids, width=max(len(row) for row in ids) * 3)
    except (RuntimeError, TypeError, ValueError) as exc:
        log.warning("packing texts into rows is off (padded batches instead): the model rejected packed inputs (%s)", exc)
        return False
    agreement = lowest_cosine(packed, encoder.embed_alone(PROBE_TEXTS))
    if agreement < PACKING_MIN_COSINE:
        log.warning(
            "packing texts into rows is off (padded batches instead): packed embeddings differ from padded ones (cosine %.4f)",
            agreement,
        )
        return False
    return True


@torch.inference_mode()
def measure_forward_overhead(encoder: TextEncoder, *, length: int = 16, rows: int = 8, repeats: int = 3) -> float:
    """The fixed cost of one forward, in tokens: the intercept over the per-token slope of
    the best-of-`repeats` times of 1 row and `rows` rows of `length` tokens.

    Large on a GPU (tokens are nearly free there, so batches stay whole), a few dozen tokens
    for a small model on CPU. Measured rather than configured because it depends on model and
    hardware alike.
    """
    ids = encoder.tokens.tokenize(["warm-up " * length])
    one = encoder.tokens.pad({name: [row[0][:length]] for name, row in ids.items()}, encoder.device)
    many = encoder.tokens.pad({name: [row[0][:length]] * rows for name, row in ids.items()}, encoder.device)
    width = one["input_ids"].shape[1]

    def best_time(batch: dict[str, torch.Tensor]) -> float:
        encoder.model(**batch)  # first call of a shape pays allocation
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            encoder.model(**batch)
            if encoder.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
        return min(times)

    t_one, t_many = best_time(one), best_time(many)
    ceiling = float(encoder.batch_size * encoder.max_seq_length)  # "never split" for all practical purposes
    per_token = (t_many - t_one) / ((rows - 1) * width)
    if per_token <= 0:  # tokens looked free (GPU, or noise): keep batches whole
        return ceiling
    return min(ceiling, max(0.0, t_one / per_token - width))
