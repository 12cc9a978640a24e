"""A fixed-window rate limit kept in Redis, so every gateway replica counts against one budget.

The window starts with a client's first request and lasts ``window_s``; one Lua script
increments the count and sets the expiry atomically (two replicas can never both see "first"),
and Redis' own clock ends the window, so replicas need no clock agreement. Fixed windows allow a
burst of up to twice the limit across a window edge; for a per-key abuse guard that is the usual
trade for one key and one round trip per request.

Redis unavailable -> the request is let through (fail-open) and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..redis_io.metrics import RedisMetrics
from ..redis_io.redis_link import RedisLink

KEY_PREFIX = "mcp-classifier:rl:v1:"

# KEYS[1] = bucket, ARGV[1] = window in ms -> {count in this window, ms until it ends}
FIXED_WINDOW_LUA = """
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    retry_after_s: int  # whole seconds until the window ends (for Retry-After)


class RateLimiter:
    def __init__(self, link: RedisLink, *, limit: int, window_s: float, metrics: RedisMetrics) -> None:
        self.link = link
        self.limit = limit
        self.window_ms = max(1, int(window_s * 1000))
        self.metrics = metrics
        self._script: Any = None
        self._script_client: Any = None

    async def hit(self, identity: str) -> Decision:
        key = KEY_PREFIX + identity
        answer = await self.link.run("ratelimit", lambda c: self._script_for(c)(keys=[key], args=[self.window_ms]), None)
        if answer is None:
            self.metrics.rate_limit_fail_open.inc()
            return Decision(True, self.limit, 0)
        count, ttl_ms = int(answer[0]), int(answer[1])
        if count <= self.limit:
            return Decision(True, self.limit, 0)
        self.metrics.rate_limited.inc()
        return Decision(False, self.limit, max(1, math.ceil(ttl_ms / 1000)))

    def _script_for(self, client: Any) -> Any:
        # redis-py's Script runs EVALSHA and loads the script on NOSCRIPT (e.g. after a Redis restart).
        if self._script_client is not client:
            self._script = client.register_script(FIXED_WINDOW_LUA)
            self._script_client = client
        return self._script
