"""/openapi.json describes every HTTP route the app serves, walked from the app itself, so a new route cannot go undocumented.

The exceptions are named here with the reason each is not an operation. What the document says about
each answer is checked against the running app by the schemathesis fuzz (tests/integration/test_fuzz_openapi.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIWebSocketRoute
from starlette.routing import Route

from mcp_classifier.settings import Settings
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import tool_filter_app

NOT_OPERATIONS = {
    ("GET", "/openapi.json"): "the document itself",
    ("GET", "/mcp"): "a refusal (405, Allow: POST): the server is stateless, there is no stream to open",
    ("DELETE", "/mcp"): "a refusal (405, Allow: POST): there is no session to delete",
}
WEBSOCKET_ROUTES = {"/ws": "a WebSocket: OpenAPI describes HTTP operations, and its handshake is no request/response operation"}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return tool_filter_app(Settings(), FakeBackend())


@pytest.fixture(scope="module")
def document(app: FastAPI) -> Iterator[dict[str, Any]]:
    with asgi_client(app) as client:
        response: httpx.Response = client.get("/openapi.json")
        assert response.status_code == 200
        yield response.json()


def served_operations(app: FastAPI) -> set[tuple[str, str]]:
    operations = set()
    for route in app.routes:
        if isinstance(route, APIWebSocketRoute):
            assert route.path in WEBSOCKET_ROUTES, f"a new WebSocket route {route.path}: say why it is not documented"
            continue
        assert isinstance(route, Route), route
        operations |= {(method, route.path_format) for method in route.methods or () if method != "HEAD"}
    return operations


def test_every_served_http_route_is_in_the_document(app: FastAPI, document: dict[str, Any]) -> None:
    documented = {(method.upper(), path) for path, operations in document["paths"].items() for method in operations}
    served = served_operations(app)
    assert served - set(NOT_OPERATIONS) == documented, "documented operations are exactly the served ones"
    assert set(NOT_OPERATIONS) <= served, "every exception names a route that exists"


def test_the_legacy_sse_routes_are_described_with_their_parameters_and_answers(document: dict[str, Any]) -> None:
    stream = document["paths"]["/sse"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"] and "503" in stream["responses"]
    post = document["paths"]["/messages"]["post"]
    assert [(p["name"], p["in"], p["required"]) for p in post["parameters"]] == [("sessionId", "query", True)]
    assert post["requestBody"]["content"]["application/json"]["schema"]
    assert {"202", "400", "404", "413"} <= set(post["responses"]) and "200" not in post["responses"]
