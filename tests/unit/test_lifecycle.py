"""The process's lifecycle (serving.lifecycle) as the HTTP door reads it: a drain reaches the door whenever it comes.

SIGTERM can come before the full app is built (the handshake door answers from the bind): the drain is the
lifecycle's, so the app built later answers /ready 503 at once and its SSE streams are refused.
"""

from __future__ import annotations

from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app


def test_a_drain_hook_runs_when_draining_starts_or_at_once_when_it_has() -> None:
    lifecycle = Lifecycle(FakeBackend())
    calls: list[str] = []
    lifecycle.on_drain(lambda: calls.append("before"))
    assert calls == [] and not lifecycle.draining
    lifecycle.start_draining()
    assert calls == ["before"] and lifecycle.draining
    lifecycle.on_drain(lambda: calls.append("after"))
    assert calls == ["before", "after"]


def test_an_app_built_after_the_signal_is_draining_from_its_first_request() -> None:
    backend = FakeBackend()
    lifecycle = Lifecycle(backend)
    lifecycle.start_draining()  # SIGTERM while the full app was still being built
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES, lifecycle=lifecycle)
    with asgi_client(app) as http:
        ready = http.get("/ready")
        assert ready.status_code == 503 and ready.json() == {"ready": False, "draining": True}
        assert http.get("/sse").status_code == 503  # the SSE sessions were drained as the app was built
        assert http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).json()["result"] == {}  # still answered
