"""A classifier's own port (``--classify-port NAME=PORT``): its ``POST /classify`` is that classifier's.

The vLLM Semantic Router addresses a remote classifier by host and port and always posts to ``/classify``. The
gateway listens on each classifier's port beside its own, in the same server, and this middleware (outermost)
reads which socket a request came in on: ``/classify`` there becomes ``/classifiers/NAME/classify`` (``/classify``
itself for the default classifier), and the full app answers it with its keys, limits, errors, headers and
metrics. Every other path on such a port is a 404 answered here: the port is one door, not a second copy of the
gateway (its probes, /metrics and the MCP doors stay on the gateway's own port).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..protocol.correlation import DoorObserver
from ..protocol.refusals import refusal_body
from ..settings import DEFAULT_CLASSIFIER
from ..util.asgi import ASGIApp, Receive, Scope, Send
from .correlated import CorrelationMiddleware
from .opening import send_json

PORT_CLASSIFY_PATH = "/classify"  # the router's path (router_classify.ROUTER_CLASSIFY_PATH)
NAMED_CLASSIFY_PATH = "/classifiers/{name}/classify"  # where the full app serves a named classifier
NOT_FOUND = "not_found"  # the refusal's kind, as the full app's for a path nothing serves
POLICY_VIOLATION = 1008  # WebSocket close code: no WebSocket door on a classifier's port


def classify_path(name: str) -> str:
    """The full app's path of classifier ``name``'s router door."""
    return PORT_CLASSIFY_PATH if name == DEFAULT_CLASSIFIER else NAMED_CLASSIFY_PATH.format(name=name)


class NotFound:
    """The answer to any other path on a classifier's port: a 404 in the service's error shape, naming the one door."""

    def __init__(self, name: str) -> None:
        self._message = f"this port serves classifier {name}'s POST {PORT_CLASSIFY_PATH} only"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 404, refusal_body(NOT_FOUND, 404, self._message))


class ClassifierPorts:
    """Routes a request by the local port it arrived on: a classifier's port serves that classifier's /classify only;
    any other port (the gateway's own) passes through untouched."""

    def __init__(self, app: ASGIApp, ports: Mapping[int, str], observer: DoorObserver | None = None) -> None:
        self._app = app
        self._ports = dict(ports)  # bound port -> classifier name
        # A refusal here is logged and counted, and carries a trace id, as the full app's are (``observer``: the door metrics).
        self._not_found = {name: CorrelationMiddleware(NotFound(name), observer=observer) for name in set(self._ports.values())}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = self._classifier_of(scope)
        if name is None:
            await self._app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == PORT_CLASSIFY_PATH:
            path = classify_path(name)
            await self._app({**scope, "path": path, "raw_path": path.encode()}, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": "only POST /classify is served on this port"})
            return
        await self._not_found[name](scope, receive, send)

    def _classifier_of(self, scope: Scope) -> str | None:
        if scope["type"] not in ("http", "websocket"):
            return None  # the lifespan: one for the whole server
        server = scope.get("server")
        return self._ports.get(server[1]) if server else None
