"""Prometheus metrics of the cache, the Redis link and the rate limiter (on the gateway's /metrics registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REDIS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class RedisMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.hits = Counter("mcp_classifier_cache_hits", "Classifications answered from the Redis cache", registry=registry)
        self.misses = Counter("mcp_classifier_cache_misses", "Cache lookups that found nothing (the backend classified)", registry=registry)
        self.bypassed = Counter(
            "mcp_classifier_cache_bypassed",
            "Texts classified without the cache, by reason (redis_unavailable, text_too_long, value_too_large, backend_info)",
            ["reason"],
            registry=registry,
        )
        self.shared = Counter(
            "mcp_classifier_cache_singleflight_shared",
            "Requests that waited for an identical in-flight lookup instead of calling the backend (single-flight)",
            registry=registry,
        )
        self.redis_errors = Counter(
            "mcp_classifier_redis_errors",
            "Redis calls that failed or timed out (answered fail-open), by operation",
            ["op"],
            registry=registry,
        )
        self.redis_skipped = Counter(
            "mcp_classifier_redis_skipped",
            "Redis calls skipped because the circuit breaker is open, by operation",
            ["op"],
            registry=registry,
        )
        self.redis_latency = Histogram(
            "mcp_classifier_redis_seconds", "Redis call latency by operation", ["op"], buckets=REDIS_BUCKETS, registry=registry
        )
        self.outages = Counter(
            "mcp_classifier_redis_outages", "Times the circuit breaker opened (Redis considered down)", registry=registry
        )
        # With several gateway workers: 0 as soon as one worker's circuit is open.
        self.redis_up = Gauge(
            "mcp_classifier_redis_up", "1 while the Redis circuit is closed, 0 while open", registry=registry, multiprocess_mode="livemin"
        )
        self.rate_limited = Counter("mcp_classifier_rate_limited", "Requests refused with 429 by the rate limiter", registry=registry)
        self.rate_limit_fail_open = Counter(
            "mcp_classifier_rate_limit_fail_open", "Requests let through unchecked because Redis was unavailable", registry=registry
        )
