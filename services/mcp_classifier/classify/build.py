"""Settings -> the classifiers of a process, and how many torch threads each model call gets.

Two steps, each in one place: ``load_model`` is the one trip into the engine (threads, the encoder, the start
cache keyed by its files, the languages it serves), done once per process; ``classifier_on`` fits one
categories file on that model (categories -> index -> scorer), all in classify. ``build_registry`` joins them
through the registry, the one road every backend and command takes.

Pure model code (torch, numpy): imported wherever a model lives (the in-process backend, its model
processes, the Ray replicas, eval), never by the web layers.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import CategorySettings, ServingSettings, Settings
from .registry import DEFAULT, ClassifierRegistry

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # torch is imported only when a model is built: the gateway image has none
    from ..engine.encoder import TextEncoder
    from .categories import CategoryConfig
    from .classifier import Classifier
    from .language import LanguageGate
    from .start_cache import StartCache


@dataclass(frozen=True)
class SharedModel:
    """What every classifier of a process shares: the encoder, the start cache keyed by its files, the languages served."""

    encoder: TextEncoder
    start_cache: StartCache | None
    language_gate: LanguageGate


def build_registry(settings: Settings, registry: ClassifierRegistry | None = None) -> ClassifierRegistry:
    """Every classifier of this process, on one model (slow: seconds). Runs wherever the model lives.

    ``registry``: its sources read already (``doctor`` checks the file before the model loads); else read here.
    """
    registry = registry or ClassifierRegistry.read(settings.categories)
    # The encoder puts the default file's instruction before every query (query-instructed models); a classifier
    # whose file names another gets a view of the same model with its own (TextEncoder.for_instruction).
    model = load_model(settings, instruction=registry.config(DEFAULT).instruction)
    return registry.build(functools.partial(classifier_on, model, settings.categories))


def build_classifier(settings: Settings) -> Classifier:
    """The default classifier alone (commands, tests, benchmarks), by the registry's road."""
    return build_registry(settings).get()


def classifier_on(model: SharedModel, categories: CategorySettings, config: CategoryConfig) -> Classifier:
    """One categories file fitted on the shared model: its index (embeddings, scorer, scope) and routing policy."""
    from threadpoolctl import threadpool_limits

    from .classifier import Classifier  # with it scikit-learn, and scipy's BLAS: loaded before the limit below

    # numpy's BLAS (OpenBLAS) keeps a thread per core that busy-waits for ~0.1 s after every
    # matmul. The scoring matmuls are tiny, and that spinning thread took most of a core from the
    # model on a 2-core box (32 clients: 236 -> 342 req/s). One BLAS thread, process-wide, for every
    # BLAS library loaded by now (a limit leaves those loaded later alone).
    threadpool_limits(limits=1, user_api="blas")
    return Classifier(
        model.encoder.for_instruction(config.instruction),  # the same encoder where the instruction is the default's
        config,
        categories.scoring_method,
        categories.lexical_scoring,
        categories.token_matching,
        model.start_cache,
        categories.scope_background,
        second_labels=categories.second_labels,
        language_gate=model.language_gate,
    )


def load_model(settings: Settings, instruction: str) -> SharedModel:
    """The process's model and what hangs on it alone: the one trip into the engine, made once."""
    import torch

    from ..engine.encoder import TextEncoder, pick_device
    from ..engine.options import EngineOptions
    from ..engine.tokenizer_threads import apply_tokenizer_threads

    model, categories, engine = settings.model, settings.categories, settings.engine
    if engine.torch_threads:
        torch.set_num_threads(engine.torch_threads)
    # Before the model loads: loading tokenises, and the tokenizer's pool keeps the size it starts with.
    tokenizer_threads = apply_tokenizer_threads(
        engine.tokenizer_threads, on_gpu=pick_device(model.device).type == "cuda", model_cpus=torch.get_num_threads()
    )
    log.debug("tokenising on %s", f"{tokenizer_threads} thread(s)" if tokenizer_threads else "a pool over every CPU")
    cache_dir = start_cache_dir(categories)
    encoder = TextEncoder.load(
        model.name,
        revision=model.model_revision,
        device=model.device,
        dtype=model.dtype,
        pooling=model.pooling,
        query_instruction=model.query_instruction,
        instruction=instruction,
        max_seq_length=model.max_seq_length,
        middle_layer=categories.middle_layer_features,
        options=EngineOptions.from_settings(engine, batch_size=settings.batching.batch_size, probe_cache_dir=cache_dir),
    )
    return SharedModel(encoder, start_cache(cache_dir, model.name, encoder), language_gate(categories, encoder.info.languages))


def language_gate(categories: CategorySettings, declared: tuple[str, ...]) -> LanguageGate:
    """The languages served: the setting's list, or the model card's where it is auto; none (every one) for any."""
    from .language import LanguageGate

    if categories.served_languages == "any":
        served: tuple[str, ...] = ()
    elif categories.served_languages == "auto":
        served = declared
    else:
        served = tuple(code.strip().lower() for code in categories.served_languages.split(","))
    log.info("languages served: %s", ", ".join(served) if served else "every language (none declared)")
    return LanguageGate(served, categories.language_min_confidence)


def start_cache_dir(categories: CategorySettings) -> Path | None:
    """Where the start cache lives; None with it off. The engine keeps its load-time checks' answers there too."""
    from ..engine.signature import default_cache_dir

    return (categories.start_cache_dir or default_cache_dir()) if categories.start_cache else None


def start_cache(cache_dir: Path | None, model: str, encoder: TextEncoder) -> StartCache | None:
    """The on-disk cache of the category texts' embeddings and the fitted scorer, where the model has files to key it by."""
    from ..engine.random_models import is_random_model
    from ..engine.signature import model_signature
    from .start_cache import CACHE_FORMAT, StartCache

    if cache_dir is None or is_random_model(model):
        return None
    info = encoder.info
    described = (
        f"format={CACHE_FORMAT}",
        model,
        info.device,
        info.dtype,
        info.pooling,
        info.dimensions,
        encoder.max_seq_length,
        encoder.feature_layers,
        encoder.spec.description,
    )
    signature = model_signature(encoder.model_dir, described)  # a hub id's too, through its local snapshot
    return StartCache(cache_dir, signature) if signature else None


def model_calls_in_flight(serving: ServingSettings) -> int:
    """Batches the in-process backend runs at once: one per model process, else per model thread."""
    return serving.model_processes or serving.model_threads


def fill_local_threading(settings: Settings) -> Settings:
    """Resolve torch_threads left on auto (0) for the in-process backend.

    One model call in flight keeps torch's own default (physical cores, or OMP_NUM_THREADS).
    Several share that budget out, so concurrent calls never oversubscribe the cores: their
    OpenMP threads would wait on each other at every barrier.
    """
    in_flight = model_calls_in_flight(settings.serving)
    if settings.engine.torch_threads or in_flight == 1:
        return settings
    import torch

    return settings.with_values(torch_threads=max(1, torch.get_num_threads() // in_flight))
