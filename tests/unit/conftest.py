"""The unit floor: the real app and dispatcher, in process, over a fake backend (no model, no subprocess)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app

BASE_URL = "http://127.0.0.1"  # a loopback Host, as a local client sends


@pytest.fixture(scope="module")
def fake_backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(scope="module")
def client(fake_backend: FakeBackend) -> Iterator[httpx.Client]:
    """The gateway app as `serve` builds it, minus Redis and the edge, over the fake backend."""
    app = gateway_app(build_dispatcher(Settings(), fake_backend), fake_backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with asgi_client(app, BASE_URL) as http:
        yield http
