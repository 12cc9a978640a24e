"""The gateway's edge (docs/security.md, "The edge") on real gateway processes: keys from env and a rotated file, logs that
never hold a key, a real MCP client with a bearer key, and one rate limit shared by two gateways through Redis.

The route-level rules of tests/unit/test_edge_rules.py run here again over real HTTP (imported below).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import fastmcp
import httpx
import pytest

from tests.support import assert_valid_classification
from tests.support.processes import ServerProcess, start_server
from tests.support.redis_server import RedisServer
from tests.unit.test_edge_rules import (  # noqa: F401 - re-collected here against real processes
    FILE_KEY,
    KEYS_ENV,
    WRONG_KEY,
    bearer,
    request,
    test_bad_origin_and_host_are_403,
    test_deeply_nested_json_on_rest_routes_is_400,
    test_health_ready_and_metrics_stay_open,
    test_invalid_utf8_is_a_clear_error_on_both_styles,
    test_missing_wrong_and_right_key_on_every_route,
    test_oversized_body_is_413_on_every_post_route,
    test_oversized_text_is_a_tool_error_on_both_styles,
)


# ---- a gateway with keys from env and a file ----------------------------------------------------------
@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory, keys_file: Path) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("auth-server"),
        "--api-keys-file",
        str(keys_file),
        "--no-cache",
        env={"MCP_CLASSIFIER_API_KEYS": KEYS_ENV},
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def auth_client(auth_server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=auth_server.url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def test_keys_never_reach_logs_or_health(auth_client: httpx.Client, auth_server: ServerProcess) -> None:
    request(auth_client, "POST", "/mcp/ping", {}, bearer(WRONG_KEY))
    exposed = auth_server.log() + auth_client.get("/health").text + auth_client.get("/metrics").text
    for key in (*KEYS_ENV.split(","), FILE_KEY, WRONG_KEY):
        assert key not in exposed
    assert "3 API key(s)" in auth_server.log()


def test_real_mcp_client_with_a_bearer_key(auth_server: ServerProcess, category_count: int) -> None:
    async def run() -> dict[str, Any]:
        async with fastmcp.Client(f"{auth_server.url}/mcp", auth=FILE_KEY) as client:
            result = await client.call_tool("classify_text", {"text": "Why is the sky blue?", "with_probabilities": True})
        return json.loads(result.content[0].text)

    assert_valid_classification(asyncio.run(run()), category_count)


def test_rotating_the_keys_file_takes_effect_without_restart(auth_client: httpx.Client, keys_file: Path) -> None:
    original = keys_file.read_text()
    try:
        keys_file.write_text("delta-key-rotated-5e6f\n")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if request(auth_client, "POST", "/mcp/ping", {}, bearer("delta-key-rotated-5e6f")).status_code == 200:
                break
            time.sleep(0.3)
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer("delta-key-rotated-5e6f")).status_code == 200
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer(FILE_KEY)).status_code == 401
        assert request(auth_client, "POST", "/mcp/ping", {}, bearer("alpha-key-7f3e")).status_code == 200  # env keys stay
    finally:
        keys_file.write_text(original)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and request(auth_client, "POST", "/mcp/ping", {}, bearer(FILE_KEY)).status_code != 200:
            time.sleep(0.3)


def test_open_server_warns_at_start(server: ServerProcess) -> None:
    assert "no API keys configured" in server.log()


# ---- two gateways, one Redis, one rate limit ---------------------------------------------------------
def test_two_gateways_sharing_one_redis_enforce_one_rate_limit(tmp_path: Path) -> None:
    limit = 20
    redis = RedisServer(tmp_path).start()
    flags = (
        "--redis-url",
        redis.url,
        "--rate-limit-requests",
        str(limit),
        "--rate-limit-window-s",
        "300",
        "--api-keys",
        "rl-key-1,rl-key-2",
    )
    with ThreadPoolExecutor(2) as starter:  # two replicas, started side by side
        gateways = list(starter.map(lambda _: start_server(tmp_path, *flags), range(2)))
    try:

        def call(i: int) -> httpx.Response:
            with httpx.Client(base_url=gateways[i % 2].url, timeout=60) as client:
                return request(
                    client,
                    "POST",
                    "/mcp/tools/call",
                    {"name": "classify_text", "arguments": {"text": f"rate limit {i % 3}"}},
                    bearer("rl-key-1"),
                )

        with ThreadPoolExecutor(8) as pool:
            responses = list(pool.map(call, range(3 * limit)))
        allowed = [r for r in responses if r.status_code == 200]
        limited = [r for r in responses if r.status_code == 429]
        assert len(allowed) + len(limited) == len(responses), {r.status_code for r in responses}
        assert abs(len(allowed) - limit) <= 1, (len(allowed), limit)
        for response in limited:
            assert 1 <= int(response.headers["retry-after"]) <= 300
            assert "rate limit" in response.json()["error"]
        served_by = {g.url: 0 for g in gateways}
        for i, r in enumerate(responses):
            served_by[gateways[i % 2].url] += r.status_code == 200
        assert all(n > 0 for n in served_by.values()), served_by  # both replicas drew on the one budget

        with httpx.Client(base_url=gateways[1].url, timeout=60) as client:
            assert request(client, "POST", "/mcp/ping", {}, bearer("rl-key-2")).status_code == 200  # another key, another budget
            assert client.get("/health").status_code == 200  # open routes are not limited
            assert request(client, "POST", "/mcp/ping", {}, bearer("rl-key-1")).status_code == 429
    finally:
        for gateway in gateways:
            gateway.stop()
        redis.stop()
