"""The LiteLLM proxy's pre-call and post-call pipelines, as the proxy runs them around every LLM request.

Imported only by the test that needs it (through a fixture): importing litellm costs about 10 s of CPU, which
every pytest process collecting the e2e tier would otherwise pay, the embedded-Ray step included.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: litellm's bundled price map

import litellm  # the dev extra installs it (mcp-classifier[litellm])
from litellm.caching.dual_cache import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.types_utils.utils import get_instance_fn
from litellm.proxy.utils import ProxyLogging

from mcp_classifier.integrations.litellm_tool_filter import METADATA_KEY, ToolFilterHook

__all__ = ["METADATA_KEY", "ToolFilterHook", "get_instance_fn", "run_proxy_post_call", "run_proxy_pre_call", "tool_call_response"]


def run_proxy_pre_call(hook: ToolFilterHook, data: dict[str, Any]) -> dict[str, Any]:
    """What the LiteLLM proxy does with a /chat/completions body before calling the model.

    ProxyLogging.pre_call_hook only calls callbacks that override async_pre_call_hook, so going through it
    also proves the hook is picked up."""
    litellm.callbacks = [hook]
    try:
        proxy_logging = ProxyLogging(user_api_key_cache=DualCache())
        return asyncio.run(proxy_logging.pre_call_hook(user_api_key_dict=UserAPIKeyAuth(), data=data, call_type="completion"))
    finally:
        litellm.callbacks = []


def _without_the_proxy_server() -> None:
    """ProxyLogging.post_call_success_hook reads ``llm_router`` from litellm.proxy.proxy_server, whose import needs the
    proxy's server extras (apscheduler and more) that the hook's users install and these tests do not. Without them,
    a stand-in module holds what a proxy configured without a router holds: ``llm_router = None``."""
    try:
        import litellm.proxy.proxy_server  # noqa: F401 - present when the proxy's extras are installed
    except ImportError:
        stand_in = types.ModuleType("litellm.proxy.proxy_server")
        stand_in.llm_router = None  # type: ignore[attr-defined]  # the one name post_call_success_hook reads
        sys.modules["litellm.proxy.proxy_server"] = stand_in


def tool_call_response(*names: str) -> litellm.ModelResponse:
    """A chat completion whose answer calls these tools, as the proxy hands it to its post-call hooks."""
    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": "{}"}} for i, name in enumerate(names)]
    with _litellms_own_warnings():
        return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": None, "tool_calls": calls}}])


@contextlib.contextmanager
def _litellms_own_warnings() -> Iterator[None]:
    """litellm's response types use typing's ReadOnly, which pydantic reports on first use: litellm's, not ours."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ReadOnly.*", category=UserWarning)
        yield


def run_proxy_post_call(hook: ToolFilterHook, data: dict[str, Any], response: Any) -> Any:
    """What the LiteLLM proxy does with a successful answer before returning it; then the hook's background posts end."""
    _without_the_proxy_server()
    litellm.callbacks = [hook]

    async def call() -> Any:
        proxy_logging = ProxyLogging(user_api_key_cache=DualCache())
        answer = await proxy_logging.post_call_success_hook(data=data, response=response, user_api_key_dict=UserAPIKeyAuth())
        await hook.flush()  # the posts run in the background; the test's loop ends here
        return answer

    try:
        with _litellms_own_warnings():
            return asyncio.run(call())
    finally:
        litellm.callbacks = []
