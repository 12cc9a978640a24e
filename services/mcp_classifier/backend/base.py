"""The async, batch-shaped backend interface every implementation (in-process, gRPC/Ray) provides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..classify.results import ClassificationResult, ClassifierInfo

if TYPE_CHECKING:
    import numpy as np

EmbeddingKind = Literal["query", "document"]


class BackendError(RuntimeError):
    """Classification could not be done; ``kind`` names why for callers and metrics."""

    kind = "internal"


class BackendUnavailable(BackendError):
    kind = "unavailable"


class BackendOverloaded(BackendError):
    kind = "overloaded"


class BackendTimeout(BackendError):
    kind = "timeout"


@runtime_checkable
class ClassificationBackend(Protocol):
    """Lifecycle (start, close), health (ready, info), the work (classify, embed) and a categories reload."""

    async def start(self) -> None:
        """Load or connect; returns when the backend can serve."""

    async def close(self) -> None:
        """Release threads, channels and models."""

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        """One result per text, in order, each with probabilities (callers drop them when not asked for)."""

    async def info(self) -> ClassifierInfo:
        """Model, categories and versions currently served."""

    async def ready(self) -> bool:
        """True when a classify call would be attempted now (used by /ready)."""

    async def reload_categories(self) -> bool:
        """Re-read the categories file wherever the model lives; True when a new version went live."""

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        """(len(texts), d) unit-length float32 vectors in one model call: queries with the model's
        instruction, documents (tool descriptions) without. For the semantic tool filter."""


class BackendWrapper:
    """Adds one concern around ``inner``: a subclass overrides only the calls that concern touches, and every
    other call goes straight through, so a wrapper never has to pass the whole interface on by hand."""

    def __init__(self, inner: ClassificationBackend) -> None:
        self.inner = inner

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def ready(self) -> bool:
        return await self.inner.ready()

    async def info(self) -> ClassifierInfo:
        return await self.inner.info()

    async def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        return await self.inner.classify(texts)

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        return await self.inner.embed(texts, kind)

    async def reload_categories(self) -> bool:
        return await self.inner.reload_categories()
