"""The ASGI call's types, written out once for the middleware of the edge and the transports.

Plain typing, no web framework: the layers that wrap an app (edge, transports, wiring, serving) share
them without importing Starlette's, and util stays free of web imports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
