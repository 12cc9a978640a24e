"""The LiteLLM hook, run by the real litellm proxy's pre-call pipeline against a real running gateway.

litellm's ProxyLogging.pre_call_hook is what the proxy calls before every LLM request; it only calls
callbacks that override async_pre_call_hook, so going through it also proves the hook is picked up.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.e2e.test_edge import auth_server  # noqa: F401 - the keyed gateway fixture
from tests.support import API_KEY_IN_FILE, closed_port
from tests.support.processes import ServerProcess, start_server

TOPICS = [
    ("get_weather", "Current weather and forecast for a city: temperature, rain, wind."),
    ("send_email", "Send an email to a recipient with a subject and body."),
    ("create_calendar_event", "Create a meeting in the calendar at a date and time."),
    ("search_web", "Search the web and return the top results."),
    ("create_jira_issue", "Open a new Jira issue in a project."),
    ("post_slack_message", "Post a message to a Slack channel."),
    ("query_database", "Run a read-only SQL query on the analytics database."),
    ("list_github_pull_requests", "List open pull requests of a GitHub repository."),
    ("translate_text", "Translate text into another language."),
    ("convert_currency", "Convert an amount between currencies at today's rate."),
    ("book_flight", "Book a flight between two airports on a date."),
    ("get_stock_price", "Latest stock price for a ticker symbol."),
    ("upload_file", "Upload a file to cloud storage."),
    ("set_reminder", "Set a reminder at a time."),
    ("play_music", "Play a song or playlist."),
    ("get_directions", "Driving or walking directions between two places."),
]
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": name, "description": description, "parameters": {"type": "object", "properties": {}}}}
    for name, description in TOPICS
]
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Will it rain in Oslo tomorrow? I need the forecast."},
]


@pytest.fixture(scope="module")
def proxy() -> ModuleType:
    """litellm and the hook, imported when this module's tests run rather than when the e2e tier is collected."""
    from tests.support import litellm_proxy

    return litellm_proxy


def request(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": copy.deepcopy(MESSAGES), "tools": copy.deepcopy(OPENAI_TOOLS), **extra}


def test_the_proxy_sends_only_the_relevant_tools_in_their_own_shape(proxy: ModuleType, server: ServerProcess) -> None:
    hook = proxy.ToolFilterHook(server.url, top_k=3, threshold=0.0, min_tools=5, timeout_s=30)
    out = proxy.run_proxy_pre_call(hook, request())
    assert 1 <= len(out["tools"]) <= 3
    assert out["tools"][0] == OPENAI_TOOLS[0]  # the weather tool, unchanged, first
    assert all(tool in OPENAI_TOOLS for tool in out["tools"])
    assert out["metadata"][proxy.METADATA_KEY] == f"{len(OPENAI_TOOLS)}->{len(out['tools'])}"


def test_a_forced_tool_choice_survives_the_filter(proxy: ModuleType, server: ServerProcess) -> None:
    hook = proxy.ToolFilterHook(server.url, top_k=2, threshold=0.0, min_tools=5, timeout_s=30)
    forced = {"type": "function", "function": {"name": "play_music"}}
    out = proxy.run_proxy_pre_call(hook, request(tool_choice=forced))
    names = [t["function"]["name"] for t in out["tools"]]
    assert "play_music" in names and names[0] == "get_weather" and out["tool_choice"] == forced


def test_nothing_relevant_removes_the_tools_instead_of_sending_an_empty_list(proxy: ModuleType, server: ServerProcess) -> None:
    hook = proxy.ToolFilterHook(server.url, top_k=3, threshold=0.99, min_tools=5, timeout_s=30)
    out = proxy.run_proxy_pre_call(hook, request(tool_choice="auto"))
    assert "tools" not in out and "tool_choice" not in out
    assert out["metadata"][proxy.METADATA_KEY] == f"{len(OPENAI_TOOLS)}->0"


def test_service_down_keeps_every_tool_and_says_why(proxy: ModuleType) -> None:
    hook = proxy.ToolFilterHook(f"http://127.0.0.1:{closed_port()}", min_tools=5, timeout_s=2)  # nothing listens there
    out = proxy.run_proxy_pre_call(hook, request())
    assert out["tools"] == OPENAI_TOOLS
    assert out["metadata"][proxy.METADATA_KEY].startswith("unfiltered: ConnectError")


def test_short_tool_lists_are_left_alone(proxy: ModuleType, server: ServerProcess) -> None:
    hook = proxy.ToolFilterHook(server.url, min_tools=len(OPENAI_TOOLS))
    out = proxy.run_proxy_pre_call(hook, request())
    assert out["tools"] == OPENAI_TOOLS and proxy.METADATA_KEY not in out.get("metadata", {})


def test_the_config_line_in_the_readme_loads_the_hook(proxy: ModuleType) -> None:
    instance = proxy.get_instance_fn("mcp_classifier.integrations.litellm_tool_filter.tool_filter_hook")
    assert isinstance(instance, proxy.ToolFilterHook)


def test_with_keys_the_hook_sends_its_bearer_key_and_a_wrong_one_fails_open(proxy: ModuleType, auth_server: ServerProcess) -> None:  # noqa: F811 - the fixture
    keyed = proxy.run_proxy_pre_call(
        proxy.ToolFilterHook(auth_server.url, api_key=API_KEY_IN_FILE, top_k=3, threshold=0.0, min_tools=5, timeout_s=30), request()
    )
    assert keyed["tools"][0] == OPENAI_TOOLS[0] and len(keyed["tools"]) <= 3
    wrong = proxy.run_proxy_pre_call(proxy.ToolFilterHook(auth_server.url, api_key="not-a-key", min_tools=5, timeout_s=30), request())
    assert wrong["tools"] == OPENAI_TOOLS and wrong["metadata"][proxy.METADATA_KEY] == "unfiltered: HTTP 401"


@pytest.fixture(scope="module")
def feedback_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A gateway with feedback from use on; without Redis (no cache, no rate limit) it keeps the vectors in process."""
    proc = start_server(tmp_path_factory.mktemp("feedback-server"), "--tool-feedback", "--no-cache")
    yield proc
    proc.stop()


def _weather_score(url: str, query: str) -> float:
    body = {"query": query, "tools": OPENAI_TOOLS, "top_k": len(OPENAI_TOOLS), "threshold": -1.0}
    answer = httpx.post(url + "/v1/tools/filter", json=body, timeout=30).json()
    return dict(zip([t["function"]["name"] for t in answer["tools"]], answer["scores"]))["get_weather"]


def test_after_a_response_that_called_tools_the_hook_sends_their_feedback(proxy: ModuleType, feedback_server: ServerProcess) -> None:
    hook = proxy.ToolFilterHook(feedback_server.url, top_k=3, threshold=0.0, min_tools=5, timeout_s=30, feedback=True)
    later = "umbrella or not for Oslo tomorrow?"
    before = _weather_score(feedback_server.url, later)
    data = proxy.run_proxy_pre_call(hook, request())
    response = proxy.tool_call_response("get_weather", "get_weather", "not_a_tool_of_the_request")
    assert proxy.run_proxy_post_call(hook, data, response) is response  # the user's answer, untouched
    metrics = httpx.get(feedback_server.url + "/metrics", timeout=30).text
    assert 'mcp_classifier_tool_feedback_total{outcome="stored"} 1.0' in metrics  # one post, for the one known tool
    assert _weather_score(feedback_server.url, later) > before  # a request like the past one now ranks it higher


def test_a_failed_feedback_post_is_logged_and_never_reaches_the_users_answer(
    proxy: ModuleType, server: ServerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    response = proxy.tool_call_response("get_weather")
    down = proxy.ToolFilterHook(f"http://127.0.0.1:{closed_port()}", min_tools=5, timeout_s=2, feedback=True)
    with caplog.at_level(logging.WARNING, logger="mcp_classifier.integrations.litellm_tool_filter"):
        assert proxy.run_proxy_post_call(down, request(), response) is response
        off = proxy.ToolFilterHook(server.url, min_tools=5, timeout_s=30, feedback=True)  # the session's gateway: feedback off
        assert proxy.run_proxy_post_call(off, request(), response) is response
    messages = [record.getMessage() for record in caplog.records]
    assert any("tool feedback not sent: ConnectError" in m for m in messages), messages
    assert any("tool feedback refused (404)" in m for m in messages), messages


def test_feedback_is_off_unless_asked_for(proxy: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    assert proxy.ToolFilterHook().feedback is False
    monkeypatch.setenv("MCP_CLASSIFIER_FILTER_FEEDBACK", "1")
    assert proxy.ToolFilterHook.from_env().feedback is True
