"""Cache rules that need no Redis and no model: key normalisation and versions, single-flight under cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from mcp_classifier.backend.base import BackendHealth
from mcp_classifier.cache import CachingBackend, Versions, cache_key, normalise_text
from mcp_classifier.classify.registry import DEFAULT
from mcp_classifier.classify.results import ClassificationResult, ClassifierInfo
from mcp_classifier.redis_io.metrics import RedisMetrics


def test_normalisation_folds_width_case_and_whitespace() -> None:
    assert normalise_text("  What\tis \u00a0ＴＣＰ?\n\n") == "what is tcp?"
    assert normalise_text("STRASSE") == normalise_text("straße")  # casefold, not lower
    versions = Versions("model", "cats-1", "policy-1")
    assert cache_key(versions, "What is TCP?") == cache_key(versions, "  what   is tcp? ")
    assert cache_key(versions, "What is TCP?") != cache_key(versions, "What is UDP?")


def test_every_version_is_part_of_the_key() -> None:
    base = Versions("model", "cats-1", "policy-1")
    keys = {
        cache_key(base, "hello"),
        cache_key(base._replace(model_id="model-2"), "hello"),
        cache_key(base._replace(category_set_version="cats-2"), "hello"),
        cache_key(base._replace(policy_version="policy-2"), "hello"),
    }
    assert len(keys) == 4
    # length-prefixed fields: moving a boundary between fields changes the key
    assert cache_key(Versions("ab", "c", "d"), "e") != cache_key(Versions("a", "bc", "d"), "e")
    assert cache_key(Versions("a", "b", "c", "neighbours"), "e") != cache_key(Versions("a", "b", "c", "neighbours+tokens"), "e")
    assert "hello" not in cache_key(base, "hello")


class _GatedBackend:
    """A stub inner backend whose predict waits for a gate: lets a test cancel the leader mid-call."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    async def health(self, *, need_info: bool = False) -> BackendHealth:
        from mcp_classifier.classify.categories import load_categories

        config = load_categories()
        info = ClassifierInfo(
            model_id="stub",
            device="cpu",
            dtype="float32",
            pooling="mean",
            categories=config,
            category_set_version=config.category_set_version,
            policy_version=config.policy_version,
            index_size=1,
            temperature=1.0,
            loo_accuracy=1.0,
        )
        return BackendHealth(ready=True, info=info)

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        self.calls += 1
        await self.gate.wait()
        return [
            ClassificationResult(
                class_index=0, category="math", confidence=0.9, model="m", use_reasoning=False, probabilities=(0.9, 0.1), entropy=0.3
            )
            for _ in texts
        ]


def test_followers_survive_a_cancelled_leader() -> None:
    async def run() -> None:
        inner = _GatedBackend()
        cache = CachingBackend(inner, None, metrics=RedisMetrics(CollectorRegistry()), ttl_s=60, max_text_chars=100, max_value_bytes=4096)
        leader = asyncio.create_task(cache.predict(["same"]))
        await asyncio.sleep(0.01)
        followers = [asyncio.create_task(cache.predict(["same"])) for _ in range(5)]
        await asyncio.sleep(0.01)
        leader.cancel()  # e.g. the leading client disconnected
        await asyncio.sleep(0.01)
        inner.gate.set()
        results = await asyncio.wait_for(asyncio.gather(*followers), 5)
        assert all(r[0].category == "math" for r in results)
        assert inner.calls == 1  # the leader's call goes on without it, and its answer serves all five followers
        assert not cache._inflight

    asyncio.run(run())
