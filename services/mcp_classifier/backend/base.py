"""The async, batch-shaped backend interface every implementation (in-process, gRPC/Ray) provides.

Small on purpose, as TEI's: a lifecycle (start, close), health, and the work (predict, embed). A categories
reload is a separate, smaller interface (``Reloadable``): only the backends that hold categories implement it,
and only the wrappers that must hear of one pass it on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult, ClassifierInfo

if TYPE_CHECKING:
    import numpy as np

EmbeddingKind = Literal["query", "document"]

NO_INFO = "what the classification backend serves is not known yet"


class BackendError(RuntimeError):
    """Classification could not be done; ``kind`` names why for callers and metrics."""

    kind = "internal"


class BackendUnavailable(BackendError):
    kind = "unavailable"


class BackendOverloaded(BackendError):
    kind = "overloaded"


class BackendTimeout(BackendError):
    kind = "timeout"


@dataclass(frozen=True)
class BackendHealth:
    """What a backend says of itself: whether a predict would be attempted now (/ready), what it serves (None
    while it cannot say), and why not. A value, not an exception, so a probe never has to catch anything; a
    caller that needs the info calls ``require_info()`` and gets the error the backend met."""

    ready: bool
    info: ClassifierInfo | None = None  # the default classifier's
    detail: str | None = None  # why not ready, or why no info
    error: BackendError | None = field(default=None, compare=False, repr=False)  # what require_info raises
    # Every classifier served, by name, the default's included; empty where the backend serves the default alone.
    classifiers: Mapping[str, ClassifierInfo] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def failed(cls, error: BackendError, *, ready: bool = False) -> BackendHealth:
        """No info, because of ``error``: its kind and message reach the caller that needed the info."""
        return cls(ready=ready, detail=str(error), error=error)

    @property
    def known(self) -> tuple[str, ...]:
        """The names of the classifiers served."""
        return tuple(self.classifiers) or (DEFAULT,)

    def every_info(self) -> dict[str, ClassifierInfo]:
        """Each classifier's info by name, the default's first (``info``, which wins over an entry of that name)."""
        return {DEFAULT: self.require_info(), **{name: info for name, info in self.classifiers.items() if name != DEFAULT}}

    def require_info(self, classifier: str = DEFAULT) -> ClassifierInfo:
        """The info of ``classifier``, or the error that kept it from the caller (BackendUnavailable where none was
        met; UnknownClassifier, with the names served, where the backend serves none of that name)."""
        if self.info is None:
            if self.error is not None:
                raise self.error
            raise BackendUnavailable(self.detail or NO_INFO)
        if classifier == DEFAULT:
            return self.info
        info = self.classifiers.get(classifier)
        if info is None:
            raise UnknownClassifier(classifier, self.known)
        return info


@runtime_checkable
class ClassificationBackend(Protocol):
    """Lifecycle (start, close), health, and the work (predict, embed)."""

    async def start(self) -> None:
        """Load or connect; returns when the backend can serve."""

    async def close(self) -> None:
        """Release threads, channels and models."""

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        """Whether a predict would be attempted now, and what is served.

        By default a probe (/ready, readiness waits): cheap and bounded, it never waits for a start in progress,
        and gives the info only where it is at hand. ``need_info`` is for a caller that needs the info (/health,
        list_categories, the cache's keys): a start in progress is waited for, up to the request deadline, as a
        predict would, and info gone stale is fetched. A BackendError is kept in the answer, never raised.
        """

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        """One result per text, in order, each with probabilities (callers drop them when not asked for), from the
        classifier of that name; UnknownClassifier (with the names served) where there is none."""

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        """(len(texts), d) unit-length float32 vectors in one model call: queries with the model's
        instruction, documents (tool descriptions) without. For the semantic tool filter."""


@runtime_checkable
class Reloadable(Protocol):
    """A backend that holds categories, or a wrapper that must hear of their reload (the cache re-keys)."""

    async def reload_categories(self) -> bool:
        """Re-read the categories file wherever the model lives; True when a new version went live."""


@runtime_checkable
class ReloadableBackend(ClassificationBackend, Reloadable, Protocol):
    """What a categories reload is asked of (hot_reload): a backend chain that passes reloads on."""


async def reload_categories_of(backend: ClassificationBackend) -> bool:
    """Pass a reload down to ``backend``; False where it holds no categories of its own (no new version went live)."""
    if isinstance(backend, Reloadable):
        return await backend.reload_categories()
    return False


class BackendWrapper:
    """Adds one concern around ``inner``: a subclass overrides only the calls that concern touches, and every
    other call goes straight through, so a wrapper never has to pass the whole interface on by hand. A reload is
    not passed on here: a wrapper that must hear of one implements ``Reloadable`` itself."""

    def __init__(self, inner: ClassificationBackend) -> None:
        self.inner = inner

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        return await self.inner.health(need_info=need_info)

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        return await self.inner.predict(texts, classifier)

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        return await self.inner.embed(texts, kind)
