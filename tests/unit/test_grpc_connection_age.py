"""The public gRPC server ends each client connection after grpc_max_connection_age_s, with a grace for calls in flight.

Without it a long-lived client (a router's channel) stays on the gateway pod it first reached, and pods the HPA adds
get no traffic from it. The options reach the real grpc.aio server the door starts, from the settings through wiring.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from mcp_classifier.edge.keys import ApiKeys
from mcp_classifier.settings import Settings
from mcp_classifier.transports import grpc_public
from mcp_classifier.transports.grpc_public import PublicGrpcServer, connection_age_options
from mcp_classifier.wiring import build_dispatcher
from tests.support.fake_backend import FakeBackend


def test_the_options_are_grpcs_max_connection_age_and_its_grace_in_milliseconds() -> None:
    assert connection_age_options(300.0, 30.0) == [("grpc.max_connection_age_ms", 300_000), ("grpc.max_connection_age_grace_ms", 30_000)]
    assert connection_age_options(0.5, 0.0) == [("grpc.max_connection_age_ms", 500), ("grpc.max_connection_age_grace_ms", 0)]
    assert connection_age_options(0.0, 30.0) == []  # 0: connections live as long as their clients keep them


def test_the_defaults_close_a_connection_after_minutes_not_seconds() -> None:
    settings = Settings()
    assert (
        60 <= settings.serving.grpc_max_connection_age_s <= 3600
        and 0 < settings.serving.grpc_max_connection_age_grace_s < settings.serving.grpc_max_connection_age_s
    )


def test_the_server_the_door_starts_gets_them(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real_server = grpc.aio.server

    def recording_server(*args: Any, **kwargs: Any) -> grpc.aio.Server:
        seen.append(kwargs.get("options"))
        return real_server(*args, **kwargs)

    monkeypatch.setattr(grpc_public.grpc.aio, "server", recording_server)

    async def run() -> None:
        settings = Settings(grpc_max_connection_age_s=120, grpc_max_connection_age_grace_s=10)
        server = PublicGrpcServer(
            build_dispatcher(settings, FakeBackend()),
            ApiKeys(None, None),
            host="127.0.0.1",
            port=0,
            reflection=False,
            tracing=False,
            max_connection_age_s=settings.serving.grpc_max_connection_age_s,
            max_connection_age_grace_s=settings.serving.grpc_max_connection_age_grace_s,
        )
        await server.start()
        await server.close(grace_s=0)

    asyncio.run(run())
    assert seen == [[("grpc.max_connection_age_ms", 120_000), ("grpc.max_connection_age_grace_ms", 10_000)]]
