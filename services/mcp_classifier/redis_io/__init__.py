"""The Redis plumbing every Redis user shares: one fail-open link and its breaker, the metrics of everything that
talks to Redis, the embedded redis-server, and the SSE session bus. What is stored there (the answer cache, tool
vectors) lives with its user; this package knows nothing of classification."""

from .metrics import RedisMetrics
from .redis_link import RedisLink

__all__ = ["RedisLink", "RedisMetrics"]
