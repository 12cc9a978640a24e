"""What a start computes from the categories file alone, kept on disk so the next start skips it.

Two things, each under a key that changes whenever its result could:
- the examples' and descriptions' embeddings (and token vectors), per text, under the model's signature
  (its files, dtype, device, pooling, layers, library versions): a changed file re-embeds only the texts
  that changed;
- the fitted scorer (cross-validated fits of the scoring method, lexical and token fusion) and the fitted
  out-of-scope model, each under a hash of everything it was fitted from.
A start with an unchanged file and model loads both and fits nothing. Files are pickles written by this
service into its own cache folder (atomically: replicas of one node may start together); a file that
fails to load is treated as absent, and a folder that cannot be written turns the cache off with a warning.
Hand-written because it is the product's own key: no caching library knows what makes an embedding stale.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from ..engine.signature import prune_least_recent

log = logging.getLogger(__name__)
T = TypeVar("T")
CACHE_FORMAT = 1  # bumped when what is stored changes shape (a part of every key)
MAX_FILES = 24  # per folder, least recently used first out: each edit of a file or a model leaves entries behind
MAX_STORED_TEXTS = 50_000  # per model signature: far more than any categories file, a bound on what edits leave behind


class DocumentEncoder(Protocol):
    """The part of the engine's encoder that embeds category texts (examples, descriptions)."""

    device: Any

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...
    def encode_with_tokens(self, texts: Sequence[str], *, query: bool) -> tuple[np.ndarray, list[Any]]: ...


def content_key(*parts: object) -> str:
    """A hash of plain values (texts, labels, options): the scorer's key beside the model's signature."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class StartCache:
    def __init__(self, directory: Path, signature: str) -> None:
        self.directory = directory
        self.signature = signature
        self._writable = True

    # ---- embeddings --------------------------------------------------------------------------
    def documents(self, encoder: DocumentEncoder, texts: Sequence[str], *, with_tokens: bool) -> tuple[np.ndarray, list[Any] | None]:
        """``encoder.encode_documents`` (or ``encode_with_tokens``, query=False) of ``texts``, from disk where it was
        computed before; only the texts not found are embedded, and the entry is rewritten for these texts."""
        path = self.directory / f"documents-{'tokens-' if with_tokens else ''}{self.signature[:32]}.pkl"
        stored: dict[str, tuple[np.ndarray, np.ndarray | None]] = self._load(path) or {}
        missing = sorted({t for t in texts if t not in stored})
        if missing:
            if with_tokens:
                vectors, tokens = encoder.encode_with_tokens(missing, query=False)
                for text, vector, token_vectors in zip(missing, vectors, tokens):
                    stored[text] = (vector, token_vectors.detach().cpu().numpy())
            else:
                for text, vector in zip(missing, encoder.encode_documents(missing)):
                    stored[text] = (vector, None)
            if len(stored) > MAX_STORED_TEXTS:  # a file edited many times over: keep what this build uses
                stored = {t: stored[t] for t in dict.fromkeys(texts)}
            self._store(path, stored)
        log.info("category texts: %d embedded, %d from the start cache", len(missing), len(set(texts)) - len(missing))
        vectors = np.stack([stored[t][0] for t in texts]).astype(np.float32, copy=False)
        if not with_tokens:
            return vectors, None
        import torch

        return vectors, [torch.from_numpy(np.asarray(stored[t][1])).to(encoder.device) for t in texts]

    # ---- fitted scorers ----------------------------------------------------------------------
    def fitted(self, key: str, fit: Callable[[], T], what: str = "scorer") -> T:
        """``fit()``'s result for ``key`` (a content_key of what it is fitted from), computed once and kept."""
        path = self.directory / f"scorer-{content_key(self.signature, key)[:32]}.pkl"
        found = self._load(path)
        if found is not None:
            log.info("fitted %s from the start cache", what)
            return found
        result = fit()
        self._store(path, result)
        return result

    # ---- files -------------------------------------------------------------------------------
    def _load(self, path: Path) -> Any:
        try:
            with path.open("rb") as file:
                value = pickle.load(file)  # the service's own files, in its own cache folder
            os.utime(path)  # used: the last to go when the folder is pruned
            return value
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - a torn or older file is a miss, never a failed start
            log.warning("start cache: ignoring %s (%s)", path, exc)
            return None

    def _store(self, path: Path, value: object) -> None:
        if not self._writable:
            return
        temporary: str | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.directory, prefix=".tmp-", delete=False) as file:
                temporary = file.name
                pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)  # atomic: a replica starting beside this one reads old or new, never half
            prune_least_recent(self.directory, "*.pkl", MAX_FILES)
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
            self._writable = False
            log.warning("start cache off for this process: cannot write %s (%s)", self.directory, exc)
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
