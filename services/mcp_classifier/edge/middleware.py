"""The edge guard as a plain ASGI middleware: Host/Origin allowlists (403), bearer keys (401), rate limit (429).

A raw ASGI middleware rather than Starlette's BaseHTTPMiddleware: it adds no task and no body
wrapping per request, which matters on the ~1 ms cache-hit path. Open routes (/health, /ready,
/metrics) skip every check: probes and scrapers carry no keys. Everything else, including routes
added later, is behind the guard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson

from ..protocol.excerpts import excerpt
from ..protocol.openai_errors import edge_refusal_body
from ..protocol.refusals import refusal_body
from ..telemetry import GatewayMetrics
from ..util.asgi import ASGIApp, Receive, Scope, Send
from .handshake import refuse_handshake
from .keys import ApiKeys, bearer_token, key_fingerprint
from .origins import Allowlist
from .ratelimit import RateLimiter

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/health", "/ready", "/metrics"})
REALM = 'Bearer realm="mcp-classifier"'
CLOSE_POLICY_VIOLATION = 1008  # the WebSocket close code of a refusal, where the server cannot answer the handshake itself


class EdgeGuard:
    def __init__(
        self,
        *,
        keys: ApiKeys,
        hosts: Allowlist,
        origins: Allowlist,
        limiter: RateLimiter | None,
        metrics: GatewayMetrics,
        route_label: Callable[[str], str] = lambda path: path,
    ) -> None:
        self.keys = keys
        self.hosts = hosts
        self.origins = origins
        self.limiter = limiter
        self.metrics = metrics
        self.route_label = route_label

    def describe(self) -> str:
        auth = f"{self.keys.count} API key(s)" if self.keys.enabled else "no API keys (open)"
        limit = f"{self.limiter.limit} requests per {self.limiter.window_ms / 1000:g} s" if self.limiter else "off"
        return f"auth: {auth}; hosts: {'any' if self.hosts.allow_all else self.hosts.spec}; origins: {self.origins.spec or 'none'}; rate limit: {limit}"

    async def check(self, scope: Scope) -> tuple[int, str, dict[str, str]] | None:
        """None when the request may pass, else (status, message, extra headers)."""
        host = origin = authorization = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"authorization":
                authorization = value.decode("latin-1")
        if not self.hosts.host_allowed(host):
            return 403, f"Host {excerpt(host) if host is not None else None} is not allowed (allowed_hosts)", {"kind": "forbidden_host"}
        if origin is not None and not self.origins.origin_allowed(origin):
            return 403, f"Origin {excerpt(origin)} is not allowed (allowed_origins)", {"kind": "forbidden_origin"}
        identity = None
        if self.keys.enabled:
            token = bearer_token(authorization)
            if token is None:
                return 401, "missing bearer token: send Authorization: Bearer <key>", {"kind": "unauthorized", "WWW-Authenticate": REALM}
            if not self.keys.verify(token):
                return 401, "invalid bearer token", {"kind": "unauthorized", "WWW-Authenticate": REALM + ', error="invalid_token"'}
            identity = "key:" + key_fingerprint(token)
        if self.limiter is not None:
            if identity is None:
                client = scope.get("client")
                identity = "ip:" + (client[0] if client else "unknown")
            decision = await self.limiter.hit(identity)
            if not decision.allowed:
                return (
                    429,
                    f"rate limit of {decision.limit} requests per window exceeded; retry in {decision.retry_after_s} s",
                    {
                        "kind": "rate_limited",
                        "Retry-After": str(decision.retry_after_s),
                        "RateLimit-Limit": str(decision.limit),
                        "RateLimit-Remaining": "0",
                    },
                )
        return None


class EdgeMiddleware:
    def __init__(self, app: ASGIApp, guard: EdgeGuard, openai_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.guard = guard
        self.openai_paths = openai_paths  # refused in OpenAI's error shape, which OpenAI's clients read

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        refusal = await self.guard.check(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, headers = refusal
        kind = headers.pop("kind")
        self.guard.metrics.errors.labels(kind).inc()
        shape = edge_refusal_body if scope["path"] in self.openai_paths else refusal_body
        body = orjson.dumps(shape(kind, status, message))
        raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        raw_headers += [(k.lower().encode(), v.encode("latin-1")) for k, v in headers.items()]
        if scope["type"] == "websocket":
            await refuse_handshake(scope, send, status, raw_headers, body, close_code=CLOSE_POLICY_VIOLATION, reason=message)
            return
        await send({"type": "http.response.start", "status": status, "headers": raw_headers})
        await send({"type": "http.response.body", "body": body})
        self.guard.metrics.observe(self.guard.route_label(scope["path"]), status, time.perf_counter() - started)


def warn_if_open(guard: EdgeGuard) -> None:
    if not guard.keys.enabled:
        log.warning("edge: no API keys configured (api_keys / api_keys_file): every route is open to anyone who can reach this port")
