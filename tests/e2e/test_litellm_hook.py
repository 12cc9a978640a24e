"""The LiteLLM hook, run by the real litellm proxy's pre-call pipeline against a real running gateway.

litellm's ProxyLogging.pre_call_hook is what the proxy calls before every LLM request; it only calls
callbacks that override async_pre_call_hook, so going through it also proves the hook is picked up.
"""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: litellm's bundled price map

import litellm  # the dev extra installs it (mcp-classifier[litellm])
from litellm.caching.dual_cache import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.types_utils.utils import get_instance_fn
from litellm.proxy.utils import ProxyLogging

from mcp_classifier.integrations.litellm_tool_filter import METADATA_KEY, ToolFilterHook
from tests.e2e.test_edge import auth_server  # noqa: F401 - the keyed gateway fixture
from tests.support import API_KEY_IN_FILE, closed_port
from tests.support.processes import ServerProcess

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


def run_proxy_pre_call(hook: ToolFilterHook, data: dict[str, Any]) -> dict[str, Any]:
    """What the LiteLLM proxy does with a /chat/completions body before calling the model."""
    litellm.callbacks = [hook]
    try:
        proxy_logging = ProxyLogging(user_api_key_cache=DualCache())
        return asyncio.run(proxy_logging.pre_call_hook(user_api_key_dict=UserAPIKeyAuth(), data=data, call_type="completion"))
    finally:
        litellm.callbacks = []


def request(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": copy.deepcopy(MESSAGES), "tools": copy.deepcopy(OPENAI_TOOLS), **extra}


def test_the_proxy_sends_only_the_relevant_tools_in_their_own_shape(server: ServerProcess) -> None:
    hook = ToolFilterHook(server.url, top_k=3, threshold=0.0, min_tools=5, timeout_s=30)
    out = run_proxy_pre_call(hook, request())
    assert 1 <= len(out["tools"]) <= 3
    assert out["tools"][0] == OPENAI_TOOLS[0]  # the weather tool, unchanged, first
    assert all(tool in OPENAI_TOOLS for tool in out["tools"])
    assert out["metadata"][METADATA_KEY] == f"{len(OPENAI_TOOLS)}->{len(out['tools'])}"


def test_a_forced_tool_choice_survives_the_filter(server: ServerProcess) -> None:
    hook = ToolFilterHook(server.url, top_k=2, threshold=0.0, min_tools=5, timeout_s=30)
    forced = {"type": "function", "function": {"name": "play_music"}}
    out = run_proxy_pre_call(hook, request(tool_choice=forced))
    names = [t["function"]["name"] for t in out["tools"]]
    assert "play_music" in names and names[0] == "get_weather" and out["tool_choice"] == forced


def test_nothing_relevant_removes_the_tools_instead_of_sending_an_empty_list(server: ServerProcess) -> None:
    hook = ToolFilterHook(server.url, top_k=3, threshold=0.99, min_tools=5, timeout_s=30)
    out = run_proxy_pre_call(hook, request(tool_choice="auto"))
    assert "tools" not in out and "tool_choice" not in out
    assert out["metadata"][METADATA_KEY] == f"{len(OPENAI_TOOLS)}->0"


def test_service_down_keeps_every_tool_and_says_why() -> None:
    hook = ToolFilterHook(f"http://127.0.0.1:{closed_port()}", min_tools=5, timeout_s=2)  # nothing listens there
    out = run_proxy_pre_call(hook, request())
    assert out["tools"] == OPENAI_TOOLS
    assert out["metadata"][METADATA_KEY].startswith("unfiltered: ConnectError")


def test_short_tool_lists_are_left_alone(server: ServerProcess) -> None:
    hook = ToolFilterHook(server.url, min_tools=len(OPENAI_TOOLS))
    out = run_proxy_pre_call(hook, request())
    assert out["tools"] == OPENAI_TOOLS and METADATA_KEY not in out.get("metadata", {})


def test_the_config_line_in_the_readme_loads_the_hook() -> None:
    instance = get_instance_fn("mcp_classifier.integrations.litellm_tool_filter.tool_filter_hook")
    assert isinstance(instance, ToolFilterHook)


def test_with_keys_the_hook_sends_its_bearer_key_and_a_wrong_one_fails_open(auth_server: ServerProcess) -> None:  # noqa: F811 - the fixture
    keyed = run_proxy_pre_call(
        ToolFilterHook(auth_server.url, api_key=API_KEY_IN_FILE, top_k=3, threshold=0.0, min_tools=5, timeout_s=30), request()
    )
    assert keyed["tools"][0] == OPENAI_TOOLS[0] and len(keyed["tools"]) <= 3
    wrong = run_proxy_pre_call(ToolFilterHook(auth_server.url, api_key="not-a-key", min_tools=5, timeout_s=30), request())
    assert wrong["tools"] == OPENAI_TOOLS and wrong["metadata"][METADATA_KEY] == "unfiltered: HTTP 401"
