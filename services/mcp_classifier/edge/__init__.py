"""The gateway's edge (docs/security.md, "The edge"): Host/Origin allowlists, bearer keys, a rate limit shared through Redis."""

from __future__ import annotations

from collections.abc import Callable

from ..redis_io.metrics import RedisMetrics
from ..redis_io.redis_link import RedisLink
from ..settings import EdgeSettings
from ..telemetry import GatewayMetrics
from .keys import ApiKeys
from .middleware import OPEN_PATHS, EdgeGuard, EdgeMiddleware, warn_if_open
from .origins import Allowlist, hosts_allowlist
from .ratelimit import RateLimiter

__all__ = ["OPEN_PATHS", "EdgeGuard", "EdgeMiddleware", "build_edge_guard"]


def build_edge_guard(
    edge: EdgeSettings,
    metrics: GatewayMetrics,
    *,
    host: str,
    link: RedisLink | None,
    redis_metrics: RedisMetrics | None,
    route_label: Callable[[str], str] = lambda path: path,
) -> EdgeGuard:
    """Reads the keys (raises OSError when api_keys_file is unreadable or empty) and warns when the API is open.
    ``host``: the bind address, which decides what allowed_hosts auto accepts."""
    import logging

    log = logging.getLogger(__name__)
    keys = ApiKeys(edge.api_keys.get_secret_value() if edge.api_keys else None, edge.api_keys_file)
    limiter = None
    if edge.rate_limit_requests > 0:
        if link is None or redis_metrics is None:
            log.warning("edge: rate_limit_requests is set but no Redis is available: rate limiting is off")
        else:
            limiter = RateLimiter(link, limit=edge.rate_limit_requests, window_s=edge.rate_limit_window_s, metrics=redis_metrics)
    guard = EdgeGuard(
        keys=keys,
        hosts=hosts_allowlist(edge.allowed_hosts, host),
        origins=Allowlist(edge.allowed_origins),
        limiter=limiter,
        metrics=metrics,
        route_label=route_label,
    )
    warn_if_open(guard)
    log.info("edge: %s", guard.describe())
    return guard
