"""The tool filter's pydantic models: the check a request goes through is the schema /openapi.json shows.

Refusals are short and our own (never the caller's value), null still means "not given", and the filter's
answers, filtered or failed open, fit the answer model the document names.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcp_classifier.backend.base import BackendUnavailable
from mcp_classifier.protocol.tools import ToolError
from mcp_classifier.settings import Settings
from mcp_classifier.toolfilter.filter_models import NOT_A_REQUEST, ToolFilterAnswer, ToolFilterRequest, parse_request
from mcp_classifier.toolfilter.tool_filter import filter_arguments
from mcp_classifier.transports.openapi import REF
from tests.support.asgi_client import asgi_client
from tests.support.fake_backend import FakeBackend
from tests.support.http_app import tool_filter_app

TOOLS = [{"name": "weather", "description": "Weather forecast for a city."}, {"name": "calendar", "description": "Meetings."}]
HUGE = "q" * 50_000


@pytest.fixture
def app_and_backend() -> Any:
    backend = FakeBackend()
    return tool_filter_app(Settings(), backend), backend


def test_null_means_not_given_and_a_whole_float_is_an_integer() -> None:
    asked = filter_arguments(
        {"query": None, "messages": [{"role": "user", "content": "rain?"}], "tools": TOOLS, "threshold": None, "top_k": 2.0}, 0.2
    )
    assert (asked.query, asked.top_k, asked.threshold, asked.tools) == ("rain?", 2, 0.2, TOOLS)


@pytest.mark.parametrize(
    "body, message",
    [
        ([], NOT_A_REQUEST),
        ({"query": "x"}, NOT_A_REQUEST),
        ({"query": "x", "tools": HUGE}, NOT_A_REQUEST),
        ({"query": 5, "tools": TOOLS}, "`query` must be a string"),
        ({"query": "x", "messages": HUGE, "tools": TOOLS}, "`messages` must be a list of messages"),
        ({"query": "x", "tools": TOOLS, "top_k": HUGE}, "top_k must be an integer of at least 1"),
        ({"query": "x", "tools": TOOLS, "top_k": 2.5}, "top_k must be an integer of at least 1"),
        ({"query": "x", "tools": TOOLS, "threshold": True}, "threshold must be a number from -1 to 1 (a cosine similarity)"),
        ({"query": "x", "tools": [*TOOLS, HUGE]}, "a tool must be an object, got str"),
        ({"query": "x", "tools": [{"description": HUGE}]}, "every tool needs a name"),
        ({"query": "x", "tools": [{"type": "function", "function": {"name": ""}}]}, "every tool needs a name"),
    ],
)
def test_a_refusal_names_the_rule_and_never_the_value(body: Any, message: str) -> None:
    with pytest.raises(ToolError) as refused:
        parse_request(body)
    assert str(refused.value) == message


def test_the_document_shows_the_model_the_filter_checks_with(app_and_backend: Any) -> None:
    app, _ = app_and_backend
    document = app.openapi()
    operation = document["paths"]["/v1/tools/filter"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {"$ref": REF.format(model="ToolFilterRequest")}
    assert document["components"]["schemas"]["ToolFilterRequest"] == ToolFilterRequest.model_json_schema(ref_template=REF)
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": REF.format(model="ToolFilterAnswer")}


def test_answers_filtered_or_failed_open_fit_the_answer_model(app_and_backend: Any) -> None:
    app, backend = app_and_backend
    with asgi_client(app) as client:
        filtered: httpx.Response = client.post("/v1/tools/filter", json={"query": "weather in Paris", "tools": TOOLS, "threshold": -1})
        backend.fail_with = BackendUnavailable("embedder unreachable")
        failed_open: httpx.Response = client.post("/v1/tools/filter", json={"query": "weather in Paris", "tools": TOOLS})
    for response, is_filtered in ((filtered, True), (failed_open, False)):
        assert response.status_code == 200, response.text
        answer = ToolFilterAnswer.model_validate(response.json())
        assert answer.filtered is is_filtered and (answer.scores is not None) is is_filtered and (answer.reason is None) is is_filtered
