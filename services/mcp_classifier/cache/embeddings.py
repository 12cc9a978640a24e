"""Tool-description embeddings, cached by content: in process (LRU) first, then Redis, then one model call.

A router sends the same tool list with every request; only the query is new. So a tool's vector is
keyed by (model id, the tool's text) and kept: a list seen before costs one query embedding, and a
list with one changed tool costs that tool's embedding plus the query. Redis shares the vectors
between gateway replicas and restarts; without it the in-process LRU still does the job. Redis
errors fail open (the link's breaker), like the classification cache. Query embeddings are
never cached (queries rarely repeat) but concurrent ones are coalesced: many routers asking at
once share one model call.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from opentelemetry import context as otel_context

from ..backend.base import ClassificationBackend
from ..backend.coalescer import RequestCoalescer
from .keys import KeyBuilder
from .redis_link import RedisLink

EMBEDDING_KEY_PREFIX = "mcp-classifier:emb:v2:"  # bump when the key or value layout changes (v2: keys.KeyBuilder)


class ToolEmbeddings:
    """What the semantic tool filter embeds with: cached documents, uncached queries."""

    def __init__(
        self,
        backend: ClassificationBackend,
        link: RedisLink | None,
        *,
        capacity: int,
        ttl_s: int,
        query_batch_size: int = 32,
        query_batch_window_ms: float = 2.0,
        max_queued_queries: int = 2048,
        query_timeout_s: float = 30.0,
    ) -> None:
        self.backend = backend
        self._queries: RequestCoalescer[np.ndarray] = RequestCoalescer(
            self._embed_queries,
            batch_size=query_batch_size,
            batch_window_ms=query_batch_window_ms,
            max_queue=max_queued_queries,
            request_timeout_s=query_timeout_s,
            work="query embedding",
        )
        self.link = link
        self.capacity = capacity
        self.ttl_s = ttl_s
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._keys: KeyBuilder | None = None  # for the backend's current model id
        self._writes: set[asyncio.Task[None]] = set()
        self.model_calls = 0  # backend embed calls made for documents (tests and /health read it)

    async def start(self) -> None:
        """The query coalescer binds to the serving loop; the backend and Redis link are started by their owners."""
        if not self._queries.running:
            self._queries.start()

    async def query(self, text: str) -> np.ndarray:
        """One query's vector; queries asked at the same time share one backend call."""
        await self.start()  # no-op once running; apps built without a lifespan start it on first use
        (vector,) = await self._queries.submit([text])
        return np.asarray(vector, dtype=np.float32)

    async def queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries (a request and its parts) in one submission: they share one backend call."""
        await self.start()
        vectors = await self._queries.submit(list(texts))
        return np.vstack([np.asarray(v, dtype=np.float32) for v in vectors])

    async def _embed_queries(self, texts: list[str], _: list[otel_context.Context]) -> list[np.ndarray]:
        return list(await self.backend.embed(texts, "query"))

    async def documents(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text, in order; every miss goes to the backend in a single call."""
        model_id = (await self.backend.info()).model_id
        if self._keys is None or self._keys.versions != (model_id,):
            self._keys = KeyBuilder((model_id,), EMBEDDING_KEY_PREFIX, normalise=False)
        keys = [self._keys.key(text) for text in texts]
        found: dict[str, np.ndarray] = {}
        for key in dict.fromkeys(keys):
            vector = self._lru.get(key)
            if vector is not None:
                self._lru.move_to_end(key)
                found[key] = vector
        wanted = [key for key in dict.fromkeys(keys) if key not in found]
        if wanted and self.link is not None:
            values: list[Any] | None = await self.link.run("mget", lambda c: c.mget(wanted), None)
            for key, value in zip(wanted, values or []):
                if value:
                    found[key] = self._remember(key, np.frombuffer(value, dtype="<f4").copy())
        missing = {key: text for key, text in zip(keys, texts) if key not in found}
        if missing:
            self.model_calls += 1
            vectors = await self.backend.embed(list(missing.values()), "document")
            fresh = {key: self._remember(key, np.asarray(v, dtype=np.float32)) for key, v in zip(missing, vectors)}
            found.update(fresh)
            self._write_behind(fresh)
        return np.vstack([found[key] for key in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    def _remember(self, key: str, vector: np.ndarray) -> np.ndarray:
        self._lru[key] = vector
        self._lru.move_to_end(key)
        while len(self._lru) > self.capacity:
            self._lru.popitem(last=False)
        return vector

    def _write_behind(self, vectors: dict[str, np.ndarray]) -> None:
        """Into Redis after the answer, never on the caller's path."""
        link = self.link
        if link is None or not vectors:
            return
        ttl = self.ttl_s

        async def write() -> None:
            async def set_all(client: Any) -> None:
                async with client.pipeline(transaction=False) as pipe:
                    for key, vector in vectors.items():
                        pipe.set(key, np.ascontiguousarray(vector, dtype="<f4").tobytes(), ex=ttl)
                    await pipe.execute()

            await link.run("set", set_all, None)

        task = asyncio.ensure_future(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def close(self) -> None:
        await self._queries.close()
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        return {"tool_embeddings_cached": len(self._lru), "tool_embedding_model_calls": self.model_calls}
