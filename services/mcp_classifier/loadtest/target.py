"""What the report says about the target and the tools: its /health, and the versions that produced the figures.

A capacity figure means nothing without the model, device, backend, replicas, batching and cache behind it.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx

HEALTH_TIMEOUT_S = 10.0


def describe_target(url: str, api_key: str | None) -> dict[str, Any]:
    """The target's /health JSON, or {"error": ...} when it could not be read (the run still goes ahead)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url.rstrip("/") + "/health", headers=headers, timeout=HEALTH_TIMEOUT_S)
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"error": f"/health could not be read: {exc}"}
    return body if isinstance(body, dict) else {"error": f"/health answered {str(body)[:200]}"}


def versions() -> dict[str, str]:
    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    return {
        "mcp-classifier": of("mcp-classifier"),
        "locust": of("locust"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
