"""The LiteLLM proxy's pre-call pipeline, as the proxy runs it before every LLM request.

Imported only by the test that needs it (through a fixture): importing litellm costs about 10 s of CPU, which
every pytest process collecting the e2e tier would otherwise pay, the embedded-Ray step included.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network here: litellm's bundled price map

import litellm  # the dev extra installs it (mcp-classifier[litellm])
from litellm.caching.dual_cache import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.types_utils.utils import get_instance_fn
from litellm.proxy.utils import ProxyLogging

from mcp_classifier.integrations.litellm_tool_filter import METADATA_KEY, ToolFilterHook

__all__ = ["METADATA_KEY", "ToolFilterHook", "get_instance_fn", "run_proxy_pre_call"]


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
