"""The answers the HTTP doors give fit the pydantic models /openapi.json names for them (transports.wire_models).

The schemathesis fuzz checks this too, over generated requests; here each shape is checked once, quickly.
"""

from __future__ import annotations

import httpx
from pydantic import BaseModel

from mcp_classifier.settings import Settings
from mcp_classifier.transports.wire_models import ErrorBody, HealthAnswer, JsonRpcAnswer, ReadyAnswer
from mcp_classifier.wiring import build_dispatcher
from tests.support import DEFAULT_MAX_BODY_BYTES
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import gateway_app


def test_each_door_answers_in_its_documented_model() -> None:
    backend = FakeBackend()
    app = gateway_app(build_dispatcher(Settings(), backend), backend, max_body_bytes=DEFAULT_MAX_BODY_BYTES)
    with asgi_client(app) as client:
        answers: list[tuple[httpx.Response, int, type[BaseModel]]] = [
            (client.get("/health"), 200, HealthAnswer),
            (client.get("/ready"), 200, ReadyAnswer),
            (client.post("/mcp/no/such/method", json={}), 404, ErrorBody),
            (client.post("/mcp/tools/call", content=b"{not json"), 400, ErrorBody),
            (client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}), 200, JsonRpcAnswer),
            (client.post("/mcp", json={"jsonrpc": "2.0", "id": "a", "method": "no/such"}), 200, JsonRpcAnswer),
        ]
    for response, status, model in answers:
        assert response.status_code == status, response.text
        model.model_validate(response.json())
    error = ErrorBody.model_validate(answers[2][0].json())
    assert error.data is not None and error.data.event_id and error.data.trace_id
