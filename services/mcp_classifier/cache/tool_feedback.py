"""Feedback from use: per tool, vectors of the requests that called it, shared by every gateway through Redis.

Only vectors are kept, never a request's text: each entry is the time it was kept and the request's query
vector. A tool's entries live under its identity (cache.embeddings.ToolEmbeddings.tool_ids: the hash of the
model id and the tool's name and description), newest first, at most ``max_vectors`` of them, each for at most
``ttl_s`` seconds (older entries are dropped when read, and a tool's key expires ``ttl_s`` after its last write).

Redis layout, per tool: ``<prefix><id>``, a list of entries (8-byte time, then the float32 vector), and
``<prefix><id>:v``, a token that changes on every write. A request reads the tokens of its list's tools in one
MGET and fetches the entries of the tools whose token changed since this process last read them. A list's first
request waits for that read; later ones are answered from this process's copy, which is read again in the
background once it is ``refresh_s`` old: feedback reaches every gateway within about that time, and no request
but a list's first waits on Redis.

Without Redis (no cache and no rate limit, or no redis-server to start) the entries are kept in this process,
with the same cap and TTL: feedback then reaches only the gateway it was posted to. Redis errors fail open, as
every Redis user here does: a write that fails is reported to the caller, and a read that fails keeps the copy
it had (or ranks without history).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..redis_io.redis_link import RedisLink

FEEDBACK_KEY_PREFIX = "mcp-classifier:feedback:v1:"  # bump when the key or value layout changes
TOKEN_SUFFIX = ":v"
STAMP_BYTES = 8  # each entry starts with the time it was kept, a little-endian float64
TOKEN_BYTES = 8  # random bytes of a write's token: two writes never share one


@dataclass(frozen=True)
class _Kept:
    """One tool's entries as this process last read them (or, without Redis, as they are)."""

    token: bytes
    stamps: np.ndarray  # (n,) float64, newest first
    vectors: np.ndarray  # (n, d) float32


@dataclass(frozen=True)
class _View:
    """A list's past requests, stacked once and reused while its tools' tokens hold and no entry has expired."""

    tokens: tuple[bytes | None, ...]
    vectors: np.ndarray
    owners: np.ndarray
    valid_until: float  # when its oldest entry passes the TTL
    read_at: float  # when its tokens were read


class FeedbackVectors:
    """The past-request store the tool filter reads (toolfilter.past_queries.PastQueryStore)."""

    def __init__(
        self,
        link: RedisLink | None,
        *,
        max_vectors: int,
        ttl_s: int,
        capacity: int,
        lists: int,
        refresh_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.link = link
        self.refresh_s = refresh_s  # how often a list's tokens are read again, in the background; 0: on every request
        self.max_vectors = max_vectors
        self.ttl_s = ttl_s
        self.capacity = capacity  # tools whose entries this process holds (LRU)
        self.lists = lists  # stacked views of recent tool lists (LRU)
        self.clock = clock
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        self._views: OrderedDict[tuple[str, ...], _View] = OrderedDict()
        self._refreshing: dict[tuple[str, ...], asyncio.Task[_View | None]] = {}
        self.recorded = 0  # entries kept by this process (health)

    async def start(self) -> None:
        pass  # nothing to start: the Redis link is started by its owner

    async def close(self) -> None:
        """The background reads end with the app."""
        tasks = list(self._refreshing.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def record(self, tool_ids: Sequence[str], vector: np.ndarray) -> bool:
        """Keep ``vector`` as a past request of each tool; False when Redis could not take it (nothing kept)."""
        entry = np.float64(self.clock()).astype("<f8").tobytes() + np.ascontiguousarray(vector, dtype="<f4").tobytes()
        ids = list(dict.fromkeys(tool_ids))
        if self.link is None:
            for tool_id in ids:
                self._keep_local(tool_id, entry)
            self.recorded += len(ids)
            return True
        cap, ttl = self.max_vectors, self.ttl_s

        async def write(client: Any) -> bool:
            async with client.pipeline(transaction=True) as pipe:
                for tool_id in ids:
                    key = FEEDBACK_KEY_PREFIX + tool_id
                    pipe.lpush(key, entry)
                    pipe.ltrim(key, 0, cap - 1)
                    pipe.expire(key, ttl)
                    pipe.set(key + TOKEN_SUFFIX, os.urandom(TOKEN_BYTES), ex=ttl)
                await pipe.execute()
            return True

        kept = await self.link.run("feedback_write", write, False)
        self.recorded += len(ids) if kept else 0
        return kept

    def _keep_local(self, tool_id: str, entry: bytes) -> None:
        before = self._kept.get(tool_id)
        entries = [entry, *_entries_of(before)][: self.max_vectors]
        self._remember(tool_id, _decode(os.urandom(TOKEN_BYTES), entries))

    async def past(self, tool_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """(vectors, owner index of each) of the tools with these ids that have past requests; None when none has.

        A list seen before is answered from this process's copy; with Redis, its tokens are read again in the
        background once the copy is ``refresh_s`` old, so no request but a list's first waits on Redis.
        """
        key, now = tuple(tool_ids), self.clock()
        view = self._views.get(key)
        if view is None or self.link is None or self.refresh_s <= 0:
            view = await self._read(key)
        else:
            if now - view.read_at >= self.refresh_s and key not in self._refreshing:
                task = self._refreshing[key] = asyncio.ensure_future(self._read(key))
                task.add_done_callback(lambda done: _settled(done, self._refreshing.pop(key, None)))
            if now >= view.valid_until:  # an entry passed the TTL: let it go, from the copy alone
                view = self._keep(key, self._view(key, view.tokens, now, view.read_at))
        return (view.vectors, view.owners) if view is not None and len(view.owners) else None

    async def _read(self, key: tuple[str, ...]) -> _View | None:
        """The list's view from its tools' current tokens; the last one kept (or None) when Redis cannot be read."""
        tokens = await self._tokens(key)
        view = self._views.get(key)
        if tokens is None:
            return view  # Redis unavailable: the copy as it was, or no history
        now = self.clock()
        if view is None or view.tokens != tokens or now >= view.valid_until:
            return self._keep(key, self._view(key, tokens, now, now))
        return self._keep(key, dataclasses.replace(view, read_at=now))

    def _keep(self, key: tuple[str, ...], view: _View) -> _View:
        if self.lists:
            self._views[key] = view
            self._views.move_to_end(key)
            while len(self._views) > self.lists:
                self._views.popitem(last=False)
        return view

    async def _tokens(self, tool_ids: Sequence[str]) -> tuple[bytes | None, ...] | None:
        """Each tool's current token (None: no entries), its entries fetched where this process's copy is stale."""
        if self.link is None:
            return tuple(kept.token if (kept := self._kept.get(i)) is not None else None for i in tool_ids)
        keys = [FEEDBACK_KEY_PREFIX + i + TOKEN_SUFFIX for i in tool_ids]
        values: list[Any] | None = await self.link.run("feedback_read", lambda c: c.mget(keys), None)
        if values is None:
            return None
        stale = [(i, t) for i, t in zip(tool_ids, values) if t is not None and (i not in self._kept or self._kept[i].token != t)]
        if stale:
            await self._fetch(stale)
        return tuple(values)

    async def _fetch(self, stale: list[tuple[str, bytes]]) -> None:
        async def read(client: Any) -> list[Any]:
            async with client.pipeline(transaction=False) as pipe:
                for tool_id, _ in stale:
                    pipe.lrange(FEEDBACK_KEY_PREFIX + tool_id, 0, self.max_vectors - 1)
                return list(await pipe.execute())

        lists = await self.link.run("feedback_read", read, None) if self.link is not None else None
        for (tool_id, token), entries in zip(stale, lists or []):
            self._remember(tool_id, _decode(token, list(entries or [])))

    def _remember(self, tool_id: str, kept: _Kept) -> None:
        self._kept[tool_id] = kept
        self._kept.move_to_end(tool_id)
        while len(self._kept) > self.capacity:
            self._kept.popitem(last=False)

    def _view(self, tool_ids: Sequence[str], tokens: tuple[bytes | None, ...], now: float, read_at: float) -> _View:
        """The list's live entries, stacked: each tool's newest first, tools in list order."""
        oldest = now - self.ttl_s
        vectors: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        valid_until = float("inf")
        for index, (tool_id, token) in enumerate(zip(tool_ids, tokens)):
            kept = self._kept.get(tool_id) if token is not None else None
            if kept is None or kept.token != token:
                continue  # no entries, or evicted from this process's copy since: the next read fetches them
            live = kept.stamps > oldest
            if not live.any() and self.link is None:
                del self._kept[tool_id]  # all expired: the in-process store lets them go as Redis would
            elif live.any():
                vectors.append(kept.vectors[live])
                owners.append(np.full(int(live.sum()), index, dtype=np.int64))
                valid_until = min(valid_until, float(kept.stamps[live].min()) + self.ttl_s)
        if not vectors:
            return _View(tokens, np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.int64), valid_until, read_at)
        return _View(tokens, np.vstack(vectors), np.concatenate(owners), valid_until, read_at)

    def health(self) -> dict[str, Any]:
        return {"tool_feedback": {"store": "redis" if self.link is not None else "process", "recorded": self.recorded}}


def _settled(task: asyncio.Task[Any], _: object) -> None:
    """A background read's outcome is its view, kept by then; a failure is logged by RedisLink, never raised here."""
    if not task.cancelled():
        task.exception()


def _entries_of(kept: _Kept | None) -> list[bytes]:
    """A local tool's entries back in their stored form (the in-process store keeps them decoded)."""
    if kept is None:
        return []
    return [stamp.astype("<f8").tobytes() + vector.astype("<f4").tobytes() for stamp, vector in zip(kept.stamps, kept.vectors)]


def _decode(token: bytes, entries: list[bytes]) -> _Kept:
    """Entries as stored (time, then vector) into arrays; entries of another width than the newest are skipped."""
    width = len(entries[0]) if entries else 0
    usable = [e for e in entries if len(e) == width and width > STAMP_BYTES]
    stamps = np.array([np.frombuffer(e[:STAMP_BYTES], dtype="<f8")[0] for e in usable], dtype=np.float64)
    vectors = np.vstack([np.frombuffer(e[STAMP_BYTES:], dtype="<f4") for e in usable]) if usable else np.zeros((0, 0), np.float32)
    return _Kept(token, stamps, vectors.astype(np.float32))
