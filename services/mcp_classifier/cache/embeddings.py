"""Tool-description embeddings, cached by content: in process (LRU) first, then Redis, then one model call.

A router sends the same tool list with every request; only the query is new. So a tool's vector is
keyed by (model id, the tool's text) and kept: a list seen before costs one query embedding, and a
list with one changed tool costs that tool's embedding plus the query. Redis shares the vectors
between gateway replicas and restarts; without it the in-process LRU still does the job. Redis
errors fail open (the link's breaker), like the classification cache. Query embeddings are
never cached (queries rarely repeat) and go straight to the backend's embed call: the backend
gathers concurrent short calls into one model call (backend.embed_batching), so many routers
asking at once share it without a second queue here.

Example requests a caller sends with its tools (`examples`) are embedded as queries and cached the same way,
under keys of their own kind. `tool_ids` is a tool's identity: the hash of the model id and the tool's
text, the one its vector is kept under, which feedback from use (cache.tool_feedback) keys by too.

Missing tool vectors are embedded in the background, a chunk at a time, and each chunk is kept as it
completes, whether or not the request that asked for it still waits. A request waits up to its deadline;
past it the filter fails open, but the chunks go on, so a list too big to embed within one deadline
becomes warm instead of failing open on every call. A later request for a tool already being embedded
waits for that work rather than starting it again.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backend.base import ClassificationBackend, EmbeddingKind
from ..redis_io.redis_link import RedisLink
from .keys import KeyBuilder

EMBEDDING_KEY_PREFIX = "mcp-classifier:emb:v2:"  # bump when the key or value layout changes (v2: keys.KeyBuilder)
EXAMPLE_KEY_PREFIX = "mcp-classifier:emb-query:v1:"  # example requests: the same texts embedded as queries differ


class ToolEmbeddings:
    """What the semantic tool filter embeds with: cached documents, uncached queries."""

    def __init__(
        self,
        backend: ClassificationBackend,
        link: RedisLink | None,
        *,
        capacity: int,
        ttl_s: int,
        query_timeout_s: float = 30.0,
        document_chunk: int = 32,
        lists: int = 64,
    ) -> None:
        self.backend = backend
        self.lists = lists  # tool lists whose identities are kept: a router sends the same list with every request
        self.document_chunk = document_chunk  # texts per background model call
        self.deadline_s = query_timeout_s  # how long a request waits for its tools' vectors
        self.link = link
        self.capacity = capacity
        self.ttl_s = ttl_s
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._ids: KeyBuilder | None = None  # tool identities for the backend's current model id
        self._id_lists: OrderedDict[tuple[str, ...], list[str]] = OrderedDict()  # recent lists' identities
        self._writes: set[asyncio.Task[None]] = set()
        # Vectors being embedded in the background, by key: requests join them; bounded by the LRU's capacity.
        self._pending: dict[str, asyncio.Future[np.ndarray]] = {}
        self._fills: set[asyncio.Task[None]] = set()
        self.model_calls = 0  # backend embed calls made for tool texts and examples (tests and /health read it)

    async def start(self) -> None:
        """Nothing of its own to start (a lifecycle service for close and /health): the backend and the Redis link
        are started by their owners."""

    async def queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries (a request and its parts) in one backend embed call, which joins other callers' short ones."""
        return np.asarray(await self.backend.embed(list(texts), "query"), dtype=np.float32)

    async def tool_ids(self, texts: Sequence[str]) -> list[str]:
        """Each text's identity: a hash of the model id and the text as written (never the text itself)."""
        model_id = (await self.backend.health(need_info=True)).require_info().model_id
        if self._ids is None or self._ids.versions != (model_id,):
            self._ids = KeyBuilder((model_id,), "", normalise=False)
            self._id_lists.clear()
        key = tuple(texts)
        ids = self._id_lists.get(key)
        if ids is None:
            ids = [self._ids.key(text) for text in texts]
            if self.lists:
                self._id_lists[key] = ids
                while len(self._id_lists) > self.lists:
                    self._id_lists.popitem(last=False)
        else:
            self._id_lists.move_to_end(key)
        return ids

    async def documents(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text, in order; every miss goes to the backend in a single call."""
        return await self._cached([EMBEDDING_KEY_PREFIX + i for i in await self.tool_ids(texts)], texts, "document")

    async def examples(self, texts: Sequence[str]) -> np.ndarray:
        """Example requests, embedded as queries (they stand for past requests) and cached like tool texts."""
        return await self._cached([EXAMPLE_KEY_PREFIX + i for i in await self.tool_ids(texts)], texts, "query")

    async def _cached(self, keys: list[str], texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        """Vectors by key: the LRU, then Redis, then the backend for the misses (in the background, waited for)."""
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
            found.update(await self._wait_for_fill(missing, kind))
        return np.vstack([found[key] for key in keys]) if keys else np.zeros((0, 0), dtype=np.float32)

    async def _wait_for_fill(self, missing: dict[str, str], kind: EmbeddingKind) -> dict[str, np.ndarray]:
        """The missing vectors, from background chunks (joined where already under way), within the deadline."""
        new = {key: text for key, text in missing.items() if key not in self._pending}
        if len(self._pending) + len(new) > self.capacity:
            raise ToolEmbeddingBacklogFull(
                f"{len(self._pending)} tool descriptions are already being embedded: {len(new)} more would pass the "
                f"cache's {self.capacity} entries"
            )
        if new:
            self._start_fill(new, kind)
        futures = {key: self._pending[key] for key in missing}
        gathered = asyncio.gather(*futures.values())
        gathered.add_done_callback(_retrieve)  # read here, or by nobody once this request has given up
        try:
            async with asyncio.timeout(self.deadline_s):
                # shield: a request that gives up (its deadline, a cancelled call) leaves the chunks running
                vectors = await asyncio.shield(gathered)
        except TimeoutError:
            done = sum(f.done() for f in futures.values())
            raise ToolEmbeddingsPending(
                f"{len(futures) - done} of {len(futures)} tool descriptions were still being embedded after "
                f"{self.deadline_s:g} s; they are kept as they finish"
            ) from None
        return dict(zip(futures, vectors))

    def _start_fill(self, texts: dict[str, str], kind: EmbeddingKind) -> None:
        loop = asyncio.get_running_loop()
        for key in texts:
            future: asyncio.Future[np.ndarray] = loop.create_future()
            future.add_done_callback(_retrieve)  # nobody may be left waiting: a failure must not log as unretrieved
            self._pending[key] = future
        task = asyncio.ensure_future(self._fill(list(texts.items()), kind))
        self._fills.add(task)
        task.add_done_callback(self._fills.discard)

    async def _fill(self, items: list[tuple[str, str]], kind: EmbeddingKind) -> None:
        """Chunk after chunk, each kept (and written behind) as it completes; a failed chunk fails the rest."""
        try:
            for start in range(0, len(items), self.document_chunk):
                chunk = items[start : start + self.document_chunk]
                self.model_calls += 1
                vectors = await self.backend.embed([text for _, text in chunk], kind)
                fresh = {key: self._remember(key, np.asarray(v, dtype=np.float32)) for (key, _), v in zip(chunk, vectors)}
                self._write_behind(fresh)
                for key, vector in fresh.items():
                    self._settle(key, vector)
        except BaseException as exc:  # every waiter must hear of it, a cancel (close) included
            for key, _ in items:
                self._settle(key, exc)
            if not isinstance(exc, Exception):
                raise

    def _settle(self, key: str, outcome: np.ndarray | BaseException) -> None:
        future = self._pending.pop(key, None)
        if future is None or future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome if isinstance(outcome, Exception) else ToolEmbeddingsPending("the service is closing"))
        else:
            future.set_result(outcome)

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
        for task in list(self._fills):
            task.cancel()
        if self._fills:
            await asyncio.gather(*self._fills, return_exceptions=True)
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    def health(self) -> dict[str, Any]:
        return {
            "tool_embeddings_cached": len(self._lru),
            "tool_embeddings_pending": len(self._pending),
            "tool_embedding_model_calls": self.model_calls,
        }


class ToolEmbeddingsPending(RuntimeError):
    """The request's deadline passed while its tools were being embedded; the work goes on in the background."""


class ToolEmbeddingBacklogFull(RuntimeError):
    """More tool descriptions are being embedded than the cache can keep: this request's are not started."""


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
