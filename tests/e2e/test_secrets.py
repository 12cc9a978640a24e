"""No secret leaves the gateway: API keys and the Redis password never appear in its logs, answers,
/health, /metrics or exported spans — not on success, not on refusals, not while Redis is down.

A real gateway process (debug logs, OTLP export to an in-test receiver) with bearer keys and a
password-protected real redis-server; the test drives every door, kills Redis mid-way, and then
searches everything the gateway let out.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from tests.support import wait_for
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.processes import start_server
from tests.support.redis_server import RedisServer

API_KEY = "sk-live-9c1e7a55d0b2f3e4"
REDIS_PASSWORD = "redis-pw-4f0d2c8be1a7"
FORGED_KEY = "sk-live-forged-000aaa111"
TOOLS = [
    {"name": "weather__forecast", "description": "Weather forecast for a city."},
    {"name": "jira__create_issue", "description": "Open a Jira issue."},
]


def test_no_key_or_password_in_logs_answers_health_metrics_or_spans(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path, password=REDIS_PASSWORD).start()
    otlp = OtlpReceiver()
    otlp.start()
    env = {
        "MCP_CLASSIFIER_API_KEYS": API_KEY,
        "MCP_CLASSIFIER_REDIS_URL": redis.url,  # the password travels in the URL
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    server = start_server(tmp_path, "--log-level", "debug", "--redis-breaker-cooldown-s", "30", env=env)
    seen: list[str] = []  # everything the gateway answered, headers included
    good = {"Authorization": f"Bearer {API_KEY}"}

    def call(http: httpx.Client, method: str, path: str, body: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
        response = http.request(
            method,
            path,
            content=None if body is None else json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        seen.append(f"{response.status_code} {dict(response.headers)} {response.text}")
        return response

    def drive(http: httpx.Client) -> None:
        assert (
            call(http, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": "integrate x squared"}}, good).status_code
            == 200
        )
        assert call(http, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, good).status_code == 200
        assert call(http, "POST", "/v1/tools/filter", {"query": "rain in Oslo?", "tools": TOOLS}, good).status_code == 200
        assert call(http, "POST", "/mcp/tools/call", {"name": "nope", "arguments": {}}, good).status_code in (200, 400, 404)
        for refused in ({}, {"Authorization": f"Bearer {FORGED_KEY}"}, {"Authorization": f"Basic {API_KEY}"}):
            assert call(http, "POST", "/mcp/ping", {}, refused).status_code == 401
        assert call(http, "POST", "/mcp/ping", {}, {**good, "Origin": "http://evil.example"}).status_code == 403
        for path in ("/health", "/ready", "/metrics", "/openapi.json"):
            call(http, "GET", path, None, good)

    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            drive(http)
            redis.kill()  # now every Redis operation fails: errors get logged and counted
            drive(http)
            texts = iter(f"is {n} a prime number" for n in range(1000))

            def outage_shown() -> bool:  # each classify is one more failed Redis lookup, until the breaker opens
                call(http, "POST", "/mcp/tools/call", {"name": "classify_text", "arguments": {"text": next(texts)}}, good)
                return not call(http, "GET", "/health").json()["cache"]["redis"]["up"]

            assert wait_for(outage_shown, timeout_s=20)
        time.sleep(1.0)  # the span processor exports every 100 ms
    finally:
        server.stop()
        otlp.stop()
        redis.stop()

    exposed = {"log": server.log(), "answers": "\n".join(seen), "spans": otlp.raw_exports().decode("utf-8", "replace")}
    assert otlp.spans(), "no spans were exported: the search below would prove nothing"
    assert "redis" in exposed["log"].lower()  # the outage was logged ...
    for secret in (API_KEY, REDIS_PASSWORD, FORGED_KEY):
        for where, text in exposed.items():
            assert secret not in text, f"{secret!r} appears in the {where}"  # ... without the password
