"""The protocol over real HTTP: a real gateway process (uvicorn, in-process backend, builtin:minilm).

The rules themselves are unit tests (tests/unit/test_jsonrpc_http.py, test_rest_style.py) on a fake
backend; the ones imported below run again here, where uvicorn's HTTP handling (chunked bodies,
413s, exact headers) and real model answers matter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.support import assert_valid_classification
from tests.support.processes import ServerProcess
from tests.unit.test_jsonrpc_http import (  # noqa: F401 - re-collected here against a real process
    call_tool,
    categories,
    max_text_length,
    test_batch_answered_as_array_matched_by_id,
    test_body_just_under_limit_is_served,
    test_classify_text_with_probabilities,
    test_classify_text_with_probabilities_false_omits_them,
    test_classify_text_without_probabilities,
    test_deeply_nested_json_is_refused_and_server_survives,
    test_get_and_delete_are_405_with_allow_post,
    test_initialize_issues_no_session_and_ignores_incoming_one,
    test_initialize_result_shape,
    test_lenient_accept_answers_json,
    test_list_categories,
    test_notification_answers_202_with_empty_body,
    test_oversized_body_is_413_and_server_keeps_serving,
    test_oversized_chunked_body_without_content_length_is_413,
    test_text_at_max_length_is_accepted,
    test_tools_list_declares_both_tools_with_schemas,
    tool_defs,
    tool_payload,
)
from tests.unit.test_rest_style import (
    test_oversized_body_is_413_and_server_keeps_serving as test_rest_oversized_body_is_413_and_server_keeps_serving,  # noqa: F401 - re-collected here
)
from tests.unit.test_rest_style import (  # noqa: F401 - re-collected here against a real process
    test_plain_tools_call_classify_text,
    test_plain_tools_call_with_probabilities,
    test_rest_works_with_default_httpx_headers,
    test_semantic_router_go_client_sequence,
)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_tools_call_works_on_a_fresh_connection_without_initialize(server: ServerProcess, category_count: int) -> None:
    # A brand-new connection that never sent initialize (any replica may receive any request).
    with httpx.Client(base_url=server.url, timeout=60) as fresh:
        result = call_tool(fresh, "classify_text", {"text": "What is the integral of x squared?"})
    assert_valid_classification(tool_payload(result, is_error=False), category_count)


def test_a_spanish_query_with_the_default_model_says_its_language_is_not_served(client: httpx.Client, category_count: int) -> None:
    """Read the way the Semantic Router's client reads it (REST style, content[0].text), and counted in /metrics."""
    response = client.post(
        "/mcp/tools/call",
        json={"name": "classify_text", "arguments": {"text": "¿Cuál es la capital de Francia y por qué?", "with_probabilities": True}},
    )
    answer = json.loads(response.json()["content"][0]["text"])
    assert_valid_classification(answer, category_count)
    assert (answer["language"], answer["language_served"], answer["in_scope"]) == ("es", False, False)
    assert answer["confidence"] < 0.5  # under the Semantic Router's default threshold: it falls back
    assert client.get("/health").json()["languages"]["served"] == ["en"]
    metrics = client.get("/metrics").text
    assert 'mcp_classifier_unserved_language_answers_total{language="es"}' in metrics
