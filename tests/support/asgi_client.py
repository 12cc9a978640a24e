"""A synchronous httpx.Client that calls an ASGI app in process, through httpx.ASGITransport.

Why by hand: httpx ships ASGITransport for async clients only, and Starlette's TestClient now
speaks httpx2, whose Request type the tests' exact-header helpers cannot build. This bridges the
one gap: each sync request runs on an anyio portal's event loop, and the app's lifespan runs there
too, so the backend starts and closes as under uvicorn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio.from_thread
import httpx
from fastapi import FastAPI


class _PortalTransport(httpx.BaseTransport):
    def __init__(self, app: Any, portal: anyio.from_thread.BlockingPortal) -> None:
        self._inner = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        chunked = "content-length" not in request.headers

        async def call() -> httpx.Response:
            async def stream() -> AsyncIterator[bytes]:
                yield body

            # A request sent without Content-Length reaches the app the same way (chunked).
            inner = httpx.Request(request.method, request.url, headers=request.headers, content=stream() if chunked and body else body)
            answer = await self._inner.handle_async_request(inner)
            content = await answer.aread()
            return httpx.Response(answer.status_code, headers=answer.headers, content=content, request=request)

        return self._portal.call(call)


@contextmanager
def asgi_client(
    app: FastAPI, base_url: str = "http://127.0.0.1", timeout_s: float = 60.0, outer: Callable[[FastAPI], Any] | None = None
) -> Iterator[httpx.Client]:
    """An httpx.Client on ``app``, lifespan included, for the duration of the ``with``. ``outer``: middleware the server
    puts around the app (the classifiers' ports), which sees each request first."""
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(app.router.lifespan_context(app)):
            served = outer(app) if outer is not None else app
            with httpx.Client(transport=_PortalTransport(served, portal), base_url=base_url, timeout=timeout_s) as client:
                yield client


TRACE_META_KEY = "dev.mcp-classifier/traceId"
