"""LiteLLM proxy hook: before each chat call, keep only the tools the request needs.

Enable it in the proxy's config (see the README, "LiteLLM"):

    litellm_settings:
      callbacks: mcp_classifier.integrations.litellm_tool_filter.tool_filter_hook

The hook posts the request's `messages` and `tools` to the service's `POST /v1/tools/filter` and
puts the answer back in `data["tools"]`, in the OpenAI shape it came in. It never stands between
a user and the LLM: when the service is slow, down or refuses, the request goes on with every
tool, and the reason is logged and recorded in the request's metadata.

With ``feedback`` on (MCP_CLASSIFIER_FILTER_FEEDBACK=1), after a response that called tools it posts the
request's messages and the tools called to `POST /v1/tools/feedback`, in the background: the user's answer
never waits for it, and a failure is logged, never raised.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import httpx
from litellm.integrations.custom_logger import CustomLogger

log = logging.getLogger(__name__)

FILTER_PATH = "/v1/tools/filter"
FEEDBACK_PATH = "/v1/tools/feedback"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})  # how an env var turns an option on
METADATA_KEY = "mcp_classifier_tool_filter"  # what happened, in data["metadata"], for LiteLLM's logs
ENV_PREFIX = "MCP_CLASSIFIER_FILTER_"


class ToolFilterHook(CustomLogger):
    """Calls the tool filter for requests that carry more than `min_tools` tools."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        *,
        api_key: str | None = None,
        top_k: int = 10,
        threshold: float | None = None,
        min_tools: int = 10,
        timeout_s: float = 1.0,
        feedback: bool = False,
    ) -> None:
        super().__init__()
        self.feedback = feedback  # post the tools a response called to /v1/tools/feedback
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.top_k = top_k
        self.threshold = threshold
        self.min_tools = min_tools
        self.timeout_s = timeout_s
        self._clients: dict[int, httpx.AsyncClient] = {}  # one pooled client per event loop
        self._sending: set[asyncio.Task[None]] = set()  # feedback posts under way: kept until done

    @classmethod
    def from_env(cls) -> ToolFilterHook:
        """MCP_CLASSIFIER_FILTER_URL, _API_KEY, _TOP_K, _THRESHOLD, _MIN_TOOLS, _TIMEOUT_S, _FEEDBACK (LiteLLM loads an
        instance)."""
        env = os.environ
        return cls(
            env.get(ENV_PREFIX + "URL", "http://127.0.0.1:8080"),
            api_key=env.get(ENV_PREFIX + "API_KEY") or None,
            top_k=int(env.get(ENV_PREFIX + "TOP_K", "10")),
            threshold=float(env[ENV_PREFIX + "THRESHOLD"]) if env.get(ENV_PREFIX + "THRESHOLD") else None,
            min_tools=int(env.get(ENV_PREFIX + "MIN_TOOLS", "10")),
            timeout_s=float(env.get(ENV_PREFIX + "TIMEOUT_S", "1.0")),
            feedback=env.get(ENV_PREFIX + "FEEDBACK", "").strip().lower() in TRUE_WORDS,
        )

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> dict:
        tools = data.get("tools")
        if not isinstance(tools, list) or len(tools) <= self.min_tools or not data.get("messages"):
            return data
        kept, note = await self._filter(data["messages"], tools)
        metadata = data.setdefault("metadata", {})
        if isinstance(metadata, dict):
            metadata[METADATA_KEY] = note
        if kept is None:
            return data
        _apply(data, tools, kept)
        return data

    async def _filter(self, messages: Any, tools: list[Any]) -> tuple[list[Any] | None, str]:
        """(the kept tools, or None to keep them all; what happened)."""
        body = {"messages": messages, "tools": tools, "top_k": self.top_k}
        if self.threshold is not None:  # unset: the service's default, measured for its model
            body["threshold"] = self.threshold
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = await self._client().post(self.url + FILTER_PATH, json=body, headers=headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            log.warning("mcp-classifier tool filter unreachable, keeping all %d tools: %s", len(tools), exc)
            return None, f"unfiltered: {type(exc).__name__}"
        if response.status_code != 200:
            log.warning(
                "mcp-classifier tool filter answered %d, keeping all %d tools: %s", response.status_code, len(tools), response.text[:200]
            )
            return None, f"unfiltered: HTTP {response.status_code}"
        payload = response.json()
        if not payload.get("filtered"):
            return None, f"unfiltered: {payload.get('reason', 'the service could not rank')}"
        return list(payload["tools"]), response.headers.get("x-tool-filter", f"{len(tools)}->{len(payload['tools'])}")

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict: Any, response: Any) -> Any:
        """After a response that called tools: their feedback, posted in the background. Returns None: the response stands."""
        if not self.feedback or not isinstance(data.get("tools"), list) or not data.get("messages"):
            return None
        called = _called_tools(data["tools"], response)
        if called:
            task = asyncio.ensure_future(self._send_feedback(data["messages"], called))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
        return None

    async def _send_feedback(self, messages: Any, called: list[Any]) -> None:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = await self._client().post(
                self.url + FEEDBACK_PATH, json={"messages": messages, "called": called}, headers=headers, timeout=self.timeout_s
            )
        except Exception as exc:  # noqa: BLE001 - feedback is a bonus: nothing may reach the user's call
            log.warning("mcp-classifier tool feedback not sent: %s: %s", type(exc).__name__, exc)
            return
        if response.status_code != 200:
            log.warning("mcp-classifier tool feedback refused (%d): %s", response.status_code, response.text[:200])

    async def flush(self) -> None:
        """Wait for the feedback posts under way (tests; a proxy shutting down)."""
        if self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    def _client(self) -> httpx.AsyncClient:
        loop = id(asyncio.get_running_loop())
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient()
        return client


def _apply(data: dict, tools: list[Any], kept: list[Any]) -> None:
    """Put the kept tools in place, without breaking what `tool_choice` asks for."""
    choice = data.get("tool_choice")
    forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if forced and not any(_name(t) == forced for t in kept):
        kept = kept + [t for t in tools if _name(t) == forced]  # the tool the caller insists on stays
    if kept:
        data["tools"] = kept
    elif choice in (None, "auto", "none"):
        data.pop("tools", None)  # no tool is relevant: an empty list is refused by OpenAI's API
        data.pop("tool_choice", None)
    # tool_choice "required" with nothing relevant: keep every tool rather than fail the call


def _called_tools(tools: list[Any], response: Any) -> list[Any]:
    """The request's tools that the response called, each once, as the request carried them (name and description)."""
    names = []
    for choice in _field(response, "choices") or []:
        for call in _field(_field(choice, "message"), "tool_calls") or []:
            name = _field(_field(call, "function"), "name")
            if isinstance(name, str):
                names.append(name)
    by_name = {_name(tool): tool for tool in tools}
    return [by_name[name] for name in dict.fromkeys(names) if name in by_name]


def _field(value: Any, name: str) -> Any:
    """A field of LiteLLM's response objects, or of the dicts some paths carry instead."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _name(tool: Any) -> str | None:
    if not isinstance(tool, dict):
        return None
    inner = tool.get("function")
    name = (inner if isinstance(inner, dict) else tool).get("name")
    return name if isinstance(name, str) else None


tool_filter_hook = ToolFilterHook.from_env()
