"""The backend interface's health and reload rules, in process over fakes: a probe never waits or raises, a caller
that needs the info gets the error the backend met, and a reload reaches the backend through every wrapper."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry

from mcp_classifier.backend.answer_counts import AnswerCounts
from mcp_classifier.backend.base import BackendHealth, BackendTimeout, BackendUnavailable, BackendWrapper, reload_categories_of
from mcp_classifier.backend.coalescer import BatchingOptions
from mcp_classifier.backend.local import NOT_LOADED, LocalBatchingBackend
from mcp_classifier.backend.starting import StartingBackend
from mcp_classifier.cache import CachingBackend
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.settings import Settings
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.wiring import build_backend
from tests.support.fake_backend import FakeBackend


def test_require_info_gives_the_info_or_raises_what_kept_it() -> None:
    info = FakeBackend().classifier_info()
    assert BackendHealth(ready=True, info=info).require_info() is info
    timeout = BackendTimeout("embedder did not answer in time")
    with pytest.raises(BackendTimeout) as raised:
        BackendHealth.failed(timeout).require_info()
    assert raised.value is timeout
    with pytest.raises(BackendUnavailable, match="still loading"):
        BackendHealth(ready=False, detail="the model is still loading").require_info()


def test_the_local_backend_before_its_start_is_not_ready_and_says_not_loaded() -> None:
    local = LocalBatchingBackend(object(), batching=BatchingOptions(1, 0.0, 1), request_timeout_s=1.0)  # type: ignore[arg-type]
    health = asyncio.run(local.health(need_info=True))
    assert not health.ready
    with pytest.raises(BackendUnavailable, match=NOT_LOADED):
        health.require_info()


class HeldStart(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def start(self) -> None:
        await self.release.wait()
        await super().start()


def test_while_the_model_loads_a_probe_answers_at_once_and_a_caller_that_needs_the_info_waits() -> None:
    async def run() -> None:
        held = HeldStart()
        starting = StartingBackend(held, wait_s=0.5)
        await starting.start()
        began = time.perf_counter()
        probe = await starting.health()
        assert not probe.ready and probe.info is None and time.perf_counter() - began < 0.4
        waited = await starting.health(need_info=True)
        assert time.perf_counter() - began >= 0.5
        with pytest.raises(BackendUnavailable, match="still loading after"):
            waited.require_info()
        held.release.set()
        assert (await starting.health(need_info=True)).require_info().model_id == "fake-model"
        assert (await starting.health()).ready
        await starting.close()

    asyncio.run(run())


class Reloads(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.reloads = 0

    async def reload_categories(self) -> bool:
        self.reloads += 1
        return True


class NoCategories(BackendWrapper):
    """A backend with no categories of its own to reload."""


def test_a_reload_passes_down_the_gateways_chain_and_is_false_where_nothing_holds_categories() -> None:
    async def run() -> None:
        model = Reloads()
        cache = CachingBackend(
            StartingBackend(model, wait_s=1.0),
            None,
            metrics=RedisMetrics(CollectorRegistry()),
            ttl_s=60,
            max_text_chars=100,
            max_value_bytes=4096,
        )
        chain = AnswerCounts(cache, GatewayMetrics())
        await chain.start()
        assert await chain.reload_categories() and model.reloads == 1
        assert not await reload_categories_of(NoCategories(FakeBackend()))
        await chain.close()

    asyncio.run(run())


def test_the_embedded_ray_before_its_start_answers_a_probe_not_ready() -> None:
    built = build_backend(Settings(backend="ray"))
    health = asyncio.run(built.backend.health())
    assert not health.ready and health.info is None and health.detail == "the embedded Ray node is not started yet"
