"""How many threads the tokenizer splits a batch over, in each process that runs the model.

HF's fast tokenizers encode a batch on a Rust thread pool (rayon) that, left alone, spans every CPU
the process sees. That suits a model on a GPU, whose CPUs idle while it works: tokenising 512 queries
on one thread took as long as their forward on an H200 (docs/decisions/0014-tokenizer-threads.md). It does not suit
replicas that share one machine's cores, where a pool over every core takes the other replica's.
The images used to turn the pool off everywhere (`TOKENIZERS_PARALLELISM=false`); the setting
`tokenizer_threads` now decides per process, from where its model runs.

The tokenizers library has no call for this, only two environment variables:
`TOKENIZERS_PARALLELISM`, read on every batch, and `RAYON_NUM_THREADS`, read once, when the pool
starts (the first batch tokenised in parallel). So the choice is made before the model is loaded.
"""

from __future__ import annotations

import os

PARALLELISM_ENV = "TOKENIZERS_PARALLELISM"
POOL_SIZE_ENV = "RAYON_NUM_THREADS"
AUTO = 0  # the setting's default: decided from where the model runs
TOKENIZERS_FALSE = {"", "0", "f", "false", "n", "no", "off"}  # the values tokenizers reads as "no pool" (its Rust source)


def resolve_tokenizer_threads(setting: int, *, on_gpu: bool, model_cpus: int) -> int | None:
    """Threads for the tokenizer: the setting where given, else from where the model runs.

    None means the tokenizer's own pool over every CPU the process sees: a model on a GPU leaves
    them idle (a Kubernetes pod's CPU limit bounds what rayon sees). On CPU, as many as the model's
    own torch threads, the CPUs this process was given: a replica never takes another's cores.
    """
    if setting != AUTO:
        return setting
    return None if on_gpu else max(1, model_cpus)


def use_tokenizer_threads(threads: int | None) -> None:
    """Set this process's tokenizer threads (None: the pool over every CPU); call before the first batch.

    The pool's size holds from its first parallel batch on: a later, different size only changes
    whether batches use it, not how many threads it has.
    """
    if threads == 1:
        os.environ[PARALLELISM_ENV] = "false"
        return
    os.environ[PARALLELISM_ENV] = "true"
    if threads is not None:
        os.environ[POOL_SIZE_ENV] = str(threads)


def tokenizer_threads_in_effect() -> int | None:
    """What this process's environment tells the tokenizer: 1 (no pool), a pool's size, or None (every CPU)."""
    if os.environ.get(PARALLELISM_ENV, "true").strip().lower() in TOKENIZERS_FALSE:
        return 1
    size = os.environ.get(POOL_SIZE_ENV, "")
    return int(size) if size.isdigit() and int(size) > 0 else None


def apply_tokenizer_threads(setting: int, *, on_gpu: bool, model_cpus: int) -> int | None:
    """Resolve and apply the setting; on auto, an explicit ``TOKENIZERS_PARALLELISM`` in the environment wins.

    Returns what applies: a thread count, or None for the pool over every CPU.
    """
    if setting != AUTO or PARALLELISM_ENV not in os.environ:
        use_tokenizer_threads(resolve_tokenizer_threads(setting, on_gpu=on_gpu, model_cpus=model_cpus))
    return tokenizer_threads_in_effect()
