"""CachingBackend: a ClassificationBackend that answers identical queries from Redis.

It wraps any backend (local, grpc, ray), so the cache sits in the gateway whatever runs the
model. Per text:

1. the key is hash(classifier name, model id, category-set version, policy version, normalised text), the
   versions coming from the inner backend's info of that classifier (``health(need_info=True)``, re-read at most
   every ``info_ttl_s``), so two classifiers never share an entry;
2. identical lookups already in flight in this process are joined (single-flight): 50 identical
   concurrent misses make one inner call; different concurrent lookups share one MGET;
3. a hit is decoded into the same ClassificationResult a fresh call gives (the value is the full
   result, probabilities included, so both ``with_probabilities`` forms share one entry);
4. misses are classified in one inner call and written back in the background with the TTL.

Redis trouble never fails a classification: the link answers "miss" and the text goes to the
backend (see RedisLink).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..backend.base import BackendHealth, BackendWrapper, ClassificationBackend, reload_categories_of
from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult, ClassifierInfo
from ..redis_io.metrics import RedisMetrics
from ..redis_io.redis_link import RedisLink
from .keys import KEY_PREFIX, KeyBuilder, Versions

log = logging.getLogger(__name__)

DEFAULT_INFO_TTL_S = 1.0
_NO_ANSWER = object()
# MGETs outstanding at once (see _lookup). One measured best here: under load each MGET then
# carries ~12 lookups instead of ~6, and a lookup waits at most for one round trip already on its way.
MAX_LOOKUPS_IN_FLIGHT = 1
DECODED_CACHE_SIZE = 4096  # decoded hit values kept in process, by their exact Redis bytes


class _LeaderGone(Exception):
    """The request leading a shared lookup was cancelled; its followers retry on their own."""


@dataclass
class _Lead:
    text: str
    future: asyncio.Future[ClassificationResult]
    positions: list[int] = field(default_factory=list)


class CachingBackend(BackendWrapper):
    """Answers predict from Redis where it can; start and embed pass straight through (tool embeddings have their
    own cache, cache/embeddings.py, and queries none). Reloadable: a reload re-keys it."""

    def __init__(
        self,
        inner: ClassificationBackend,
        link: RedisLink | None,
        *,
        metrics: RedisMetrics,
        ttl_s: int,
        max_text_chars: int,
        max_value_bytes: int,
        info_ttl_s: float = DEFAULT_INFO_TTL_S,
        key_prefix: str = KEY_PREFIX,
    ) -> None:
        super().__init__(inner)
        self.link = link
        self.metrics = metrics
        self.ttl_s = ttl_s
        self.max_text_chars = max_text_chars
        self.max_value_bytes = max_value_bytes
        self.info_ttl_s = info_ttl_s
        self.key_prefix = key_prefix
        self._versions: dict[str, Versions] = {}  # by classifier name: every classifier the inner backend serves
        self._versions_at = 0.0
        self._versions_refresh: asyncio.Future[dict[str, Versions]] | None = None
        self._keys: dict[str, KeyBuilder] = {}
        self._decoded: dict[bytes, ClassificationResult] = {}
        self._inflight: dict[str, asyncio.Future[ClassificationResult]] = {}
        self._writes: set[asyncio.Task[None]] = set()  # write-behinds and batched lookups in flight
        self._pending_lookups: list[tuple[list[str], asyncio.Future[list[bytes | None] | None]]] = []
        self._lookup_scheduled = False
        self._lookups_in_flight = 0

    # ---- the calls the cache changes ------------------------------------------------------------
    async def close(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        await self.inner.close()

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        """Always the inner backend's; info read for a caller that needs it re-keys the cache at once on a version change."""
        health = await self.inner.health(need_info=need_info)
        if need_info and health.info is not None:
            self._remember_versions(health)
        return health

    async def reload_categories(self) -> bool:
        """Hot reload on the inner backend; once it reports success the new versions key every lookup."""
        changed = bool(await reload_categories_of(self.inner))
        self.invalidate_versions()
        try:
            await self.health(need_info=True)
        except Exception:  # noqa: BLE001 - the next predict re-reads the versions anyway
            pass
        return changed

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        if not texts:
            return []
        try:
            versions = await self.versions(classifier)
        except UnknownClassifier:
            raise
        except Exception:  # noqa: BLE001 - no versions, no safe key: let the backend answer (or fail) alone
            self.metrics.bypassed.labels("backend_info").inc(len(texts))
            return await self.inner.predict(texts, classifier)

        results: list[ClassificationResult | None] = [None] * len(texts)
        leads: dict[str, _Lead] = {}
        follows: list[tuple[int, str, asyncio.Future[ClassificationResult]]] = []
        uncached: list[int] = []
        inflight = self._inflight
        loop = asyncio.get_running_loop()
        keys = self._keys.get(classifier)
        if keys is None or keys.versions is not versions:
            keys = self._keys[classifier] = KeyBuilder(versions, self.key_prefix)
        for i, text in enumerate(texts):
            if len(text) > self.max_text_chars:
                uncached.append(i)
                continue
            key = keys.key(text)
            lead = leads.get(key)
            if lead is not None:  # the same text twice in one call
                lead.positions.append(i)
                continue
            future = inflight.get(key)
            if future is not None:
                follows.append((i, text, future))
                continue
            future = loop.create_future()
            inflight[key] = future
            leads[key] = _Lead(text, future, [i])
        if uncached:
            self.metrics.bypassed.labels("text_too_long").inc(len(uncached))

        if leads or uncached:
            await self._lead(versions, leads, uncached, texts, results)
        if follows:
            self.metrics.shared.inc(len(follows))
            for i, text, future in follows:
                try:
                    results[i] = await asyncio.shield(future)
                except _LeaderGone:
                    (results[i],) = await self.predict([text], classifier)
        return results  # type: ignore[return-value]  # every slot is filled above

    # ---- versions (cache keys change the moment the backend's versions do) --------------------
    async def versions(self, classifier: str = DEFAULT) -> Versions:
        """What keys ``classifier``'s answers now; UnknownClassifier where the backend serves none of that name."""
        every = self._versions
        if not every or time.monotonic() - self._versions_at >= self.info_ttl_s:
            # One info read refreshes for everybody waiting (it may be an RPC or an IPC).
            if self._versions_refresh is None:
                self._versions_refresh = asyncio.ensure_future(self._refresh_versions())
            every = await asyncio.shield(self._versions_refresh)
        versions = every.get(classifier)
        if versions is None:
            raise UnknownClassifier(classifier, tuple(every))
        return versions

    async def _refresh_versions(self) -> dict[str, Versions]:
        try:
            return self._remember_versions(await self.inner.health(need_info=True))
        finally:
            self._versions_refresh = None

    def _remember_versions(self, health: BackendHealth) -> dict[str, Versions]:
        for name, info in health.every_info().items():
            versions = _versions_of(name, info)
            # Replaced only on a change: predict() rebuilds its key hasher when this object changes.
            before = self._versions.get(name)
            if versions != before:
                if before is not None:
                    log.info("cache: classifier %r versions changed %s -> %s; new cache keys from now on", name, before, versions)
                self._versions[name] = versions
        self._versions_at = time.monotonic()
        return self._versions

    def invalidate_versions(self) -> None:
        """Re-read the versions on the next call (a hot reload calls this once it has swapped categories)."""
        self._versions_at = 0.0

    # ---- the leader's work -------------------------------------------------------------------
    async def _lead(
        self,
        versions: Versions,
        leads: dict[str, _Lead],
        uncached: list[int],
        texts: Sequence[str],
        results: list[ClassificationResult | None],
    ) -> None:
        keys = list(leads)
        pending = set(keys)  # keys whose in-flight entry this call still owns
        try:
            found: list[bytes | None] | None = []
            if keys:
                lookup = self._lookup(keys)
                found = None if lookup is None else await lookup
            answered = found is not None
            if found is None:
                found = [None] * len(keys)
            miss_keys: list[str] = []
            for key, raw in zip(keys, found):
                lead = leads[key]
                result = self._decode(raw) if raw is not None else None
                if result is None:
                    miss_keys.append(key)
                    continue
                for i in lead.positions:
                    results[i] = result
                lead.future.set_result(result)
                self._inflight.pop(key, None)
                pending.discard(key)
            if len(miss_keys) < len(keys):
                self.metrics.hits.inc(len(keys) - len(miss_keys))
            if miss_keys:
                if answered:
                    self.metrics.misses.inc(len(miss_keys))
                else:
                    self.metrics.bypassed.labels("redis_unavailable").inc(len(miss_keys))
            if not miss_keys and not uncached:
                return
            batch = [leads[k].text for k in miss_keys] + [texts[i] for i in uncached]
            call = asyncio.ensure_future(self.inner.predict(batch))
            try:
                fresh = await asyncio.shield(call)
            except asyncio.CancelledError:
                # The caller gave up (its deadline, a dropped connection), but the answers are paid for: they still
                # reach the cache, and whoever joined them still gets them.
                call.add_done_callback(lambda done: self._settle_abandoned(done, versions, leads, miss_keys))
                pending.difference_update(miss_keys)
                raise
            for key, result in zip(miss_keys, fresh):
                lead = leads[key]
                for i in lead.positions:
                    results[i] = result
                lead.future.set_result(result)
            for i, result in zip(uncached, fresh[len(miss_keys) :]):
                results[i] = result
            if miss_keys:
                # In-flight entries stay until the write lands, so a request arriving meanwhile
                # joins the finished future instead of missing in Redis and classifying again.
                self._write_behind(versions, {k: leads[k].future for k in miss_keys})
                pending.difference_update(miss_keys)
        except BaseException as exc:
            shared = _LeaderGone() if isinstance(exc, asyncio.CancelledError) else exc
            for key in pending:
                future = leads[key].future
                if not future.done():
                    future.set_exception(shared)
                    future.exception()  # followers, if any, see it; nobody else must log it as unretrieved
                if self._inflight.get(key) is future:
                    del self._inflight[key]
            raise

    def _settle_abandoned(
        self, call: asyncio.Future[list[ClassificationResult]], versions: Versions, leads: dict[str, _Lead], miss_keys: list[str]
    ) -> None:
        """A predict call its caller gave up on has ended: its answers go to the joined requests and the cache."""
        failure: BaseException | None = _LeaderGone() if call.cancelled() else call.exception()
        fresh = [] if failure is not None else call.result()
        for n, key in enumerate(miss_keys):
            future = leads[key].future
            if future.done():
                continue
            if failure is None:
                future.set_result(fresh[n])
            else:
                future.set_exception(failure)
                future.exception()  # followers, if any, see it; nobody else must log it as unretrieved
                if self._inflight.get(key) is future:
                    del self._inflight[key]
        if failure is None and miss_keys:
            self._write_behind(versions, {k: leads[k].future for k in miss_keys})

    def _lookup(self, keys: list[str]) -> asyncio.Future[list[bytes | None] | None] | None:
        """A future of the stored values (None where absent; the whole result None when Redis did
        not answer), or None without Redis.

        Lookups are batched: they queue, and one MGET carries the whole queue. At most
        MAX_LOOKUPS_IN_FLIGHT MGETs are outstanding; lookups arriving meanwhile go in the next one,
        sent as soon as the previous answer is in (self-clocking, like Nagle's algorithm). Under load a hit then costs a fraction of one Redis round trip (one socket write, one
        wake-up of Redis, one reply to parse, shared by every queued request), which on a small box
        is most of what a hit costs; a lone request finds nothing in flight and goes out at once.
        """
        if self.link is None:
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[bytes | None] | None] = loop.create_future()
        self._pending_lookups.append((keys, future))
        if not self._lookup_scheduled and self._lookups_in_flight < MAX_LOOKUPS_IN_FLIGHT:
            self._lookup_scheduled = True
            loop.call_soon(self._flush_lookups)
        return future

    def _flush_lookups(self) -> None:
        self._lookup_scheduled = False
        if not self._pending_lookups or self._lookups_in_flight >= MAX_LOOKUPS_IN_FLIGHT:
            return
        batch, self._pending_lookups = self._pending_lookups, []
        self._lookups_in_flight += 1
        task = asyncio.ensure_future(self._lookup_batch(batch))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _lookup_batch(self, batch: list[tuple[list[str], asyncio.Future[list[bytes | None] | None]]]) -> None:
        link = self.link
        assert link is not None
        try:
            keys = [k for ks, _ in batch for k in ks]
            if len(keys) == 1:
                key = keys[0]
                value = await link.run("get", lambda c: c.get(key), _NO_ANSWER)
                values: list[Any] | None = None if value is _NO_ANSWER else [value]
            else:
                values = await link.run("mget", lambda c: c.mget(keys), None)
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            raise
        finally:
            self._lookups_in_flight -= 1
            if self._pending_lookups and not self._lookup_scheduled:
                self._lookup_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush_lookups)
        offset = 0
        for ks, future in batch:
            if not future.done():  # its caller may have been cancelled meanwhile
                future.set_result(None if values is None else values[offset : offset + len(ks)])
            offset += len(ks)

    def _decode(self, raw: bytes) -> ClassificationResult | None:
        # Hot entries come back as the same bytes again and again: results are immutable, so the
        # decoded object is reused (a bounded map, cleared when full) instead of parsed each time.
        result = self._decoded.get(raw)
        if result is not None:
            return result
        try:
            result = ClassificationResult.from_dict(orjson.loads(raw))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            self.metrics.redis_errors.labels("decode").inc()
            return None
        if len(self._decoded) >= DECODED_CACHE_SIZE:
            self._decoded.clear()
        self._decoded[raw] = result
        return result

    def _write_behind(self, versions: Versions, entries: dict[str, asyncio.Future[ClassificationResult]]) -> None:
        task = asyncio.ensure_future(self._write(versions, entries))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, versions: Versions, entries: dict[str, asyncio.Future[ClassificationResult]]) -> None:
        try:
            link = self.link
            # Versions changed while the backend worked: the answer may come from either side of
            # the change, so it is not stored under a key that claims one of them.
            if link is None or versions != self._versions.get(versions.classifier):
                return
            values: dict[str, bytes] = {}
            for key, future in entries.items():
                value = orjson.dumps(future.result().to_dict())
                if len(value) > self.max_value_bytes:
                    self.metrics.bypassed.labels("value_too_large").inc()
                    continue
                values[key] = value
            if not values:
                return
            ttl = self.ttl_s
            if len(values) == 1:
                ((key, value),) = values.items()
                await link.run("set", lambda c: c.set(key, value, ex=ttl), None)
            else:

                async def set_many(c: Any) -> None:
                    async with c.pipeline(transaction=False) as pipe:
                        for k, v in values.items():
                            pipe.set(k, v, ex=ttl)
                        return await pipe.execute()

                await link.run("set", set_many, None)
        finally:
            for key, future in entries.items():
                if self._inflight.get(key) is future:
                    del self._inflight[key]


def _versions_of(name: str, info: ClassifierInfo) -> Versions:
    return Versions(info.model_id, info.category_set_version, info.policy_version, info.scoring, info.language_policy, name)
