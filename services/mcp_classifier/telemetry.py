"""Prometheus metrics (and, later, OpenTelemetry setup). Used by all layers, depends on none of them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class GatewayMetrics:
    """One registry per app instance, so several apps in one process (tests) never collide."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mcp_classifier_requests", "HTTP requests by route and status code", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "mcp_classifier_request_seconds", "HTTP request latency by route", ["route"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.errors = Counter(
            "mcp_classifier_errors", "Errors answered, by kind (parse, invalid, backend_unavailable, ...)", ["kind"], registry=self.registry
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
