"""Metrics labels of request paths: bounded, so an unknown path or REST method cannot add a time series."""

from __future__ import annotations

from .correlated import OPENAI_DOOR_PATHS, TOOL_FEEDBACK_PATH, TOOL_FILTER_PATH

OPENAPI_PATH = "/openapi.json"
NAMED_CLASSIFY_LABEL = "/classifiers/{name}/classify"
REST_METHODS = frozenset({"initialize", "tools/list", "tools/call", "resources/list", "prompts/list", "ping"})
_KNOWN_PATHS = frozenset(
    {
        "/mcp",
        "/health",
        "/ready",
        "/metrics",
        "/ws",
        "/sse",
        "/messages",
        TOOL_FILTER_PATH,
        TOOL_FEEDBACK_PATH,
        OPENAPI_PATH,
        "/classify",
        *OPENAI_DOOR_PATHS,
    }
)


def route_label(path: str) -> str:
    """Metrics label of a request path (unknown REST methods share one label, unknown paths another)."""
    if path.startswith("/mcp/"):
        method = path[len("/mcp/") :]
        return "/mcp/" + (method if method in REST_METHODS else "<unknown>")
    if path.startswith("/classifiers/") and path.endswith("/classify"):
        return NAMED_CLASSIFY_LABEL  # one label for every name: names are the operator's, but a path can be anything
    return path if path in _KNOWN_PATHS else "<other>"
