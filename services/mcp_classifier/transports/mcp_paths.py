"""`/mcp/` works like `/mcp` on every style: a client given a base URL with a trailing slash still lands.

The vLLM Semantic Router's client joins its base URL and the method with a slash, so a base ending in
`/mcp/` calls `/mcp//initialize`; Starlette's own slash redirect answers a POST with a 307 that many
clients do not follow with the body. Rewritten here, before routing, edge checks and logs see the path.
"""

from __future__ import annotations

import re

from ..edge.middleware import ASGIApp, Receive, Scope, Send

_SLASHES = re.compile(r"/{2,}")


def canonical_mcp_path(path: str) -> str:
    """`/mcp/` -> `/mcp`, `/mcp//initialize` -> `/mcp/initialize`; other paths unchanged."""
    if path != "/mcp/" and not path.startswith("/mcp/"):
        return path
    collapsed = _SLASHES.sub("/", path)
    return collapsed.rstrip("/") or "/"


class McpPathMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = canonical_mcp_path(scope["path"])
            if path != scope["path"]:
                scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)
