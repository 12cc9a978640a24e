"""`serve --workers 2`: two gateway processes on one port behave as one gateway.

Every door answers from both workers, a legacy SSE session whose stream one worker holds is answered
by the other, a categories reload reaches both, and /metrics on either shows the totals of both. Which
worker answered is read from the access log's ``pid`` (each worker's lines name it) and from /health's
``worker``; the kernel spreads connections over the workers, so each check opens fresh connections
until both have answered.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from mcp_classifier.api.v1 import gateway_pb2 as gpb
from mcp_classifier.api.v1 import gateway_pb2_grpc as gpb_grpc
from tests.support import assert_valid_classification, sse_data, wait_for
from tests.support.categories import DEFAULT_FILE, FINANCE, write_with_finance
from tests.support.processes import START_BUDGET, ServerProcess, start_server

WORKERS = 2
MAX_TRIES = 64  # fresh connections before giving up on reaching both workers (each lands on one at random)
GRPC_LISTENING = re.compile(r"gRPC API listening on (\S+:\d+)")
READY_LINE = re.compile(r"mcp-classifier ready on (\S+) .*2 workers")
REQUESTS_BY_DOOR = re.compile(r'^mcp_classifier_door_requests_total\{door="(\w+)"\} (\S+)$', re.MULTILINE)


@pytest.fixture(scope="module")
def categories_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("categories") / "categories.yaml"
    shutil.copy(DEFAULT_FILE, path)
    return path


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, categories_file: Path) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp("workers"),
        *("--workers", str(WORKERS), "--grpc-port", "0", "--categories-file", str(categories_file)),
        wait_ready=False,
    )
    try:
        # /ready may come from the first worker to start: the supervisor's one "ready on" line waits for both, which
        # load a model each on the same cores (so twice a lone start's budget).
        ready = wait_for(lambda: READY_LINE.search(server.log()), timeout_s=WORKERS * START_BUDGET.wait_s(), interval_s=0.2)
        assert ready, server.log()[-3000:]
        yield server
    finally:
        server.stop()


def access_lines(server: ServerProcess, door: str) -> list[dict]:
    lines = [json.loads(raw) for raw in server.log().splitlines() if raw.startswith("{")]
    return [line for line in lines if line.get("logger") == "mcp_classifier.access" and line.get("door") == door]


def health_on_a_fresh_connection(url: str) -> dict:
    return httpx.get(f"{url}/health", timeout=30).json()


def until_both_workers_answered(server: ServerProcess, door: str, call: Callable[[], None]) -> set[int]:
    """Make ``call`` (one request on a fresh connection) until the access log shows both workers answering ``door``."""
    for _ in range(MAX_TRIES):
        call()
        pids = {line["pid"] for line in access_lines(server, door)}
        if len(pids) == WORKERS:
            return pids
    raise AssertionError(f"door {door}: only workers {pids} answered in {MAX_TRIES} tries")


def test_every_door_answers_from_both_workers(gateway: ServerProcess, category_count: int) -> None:
    url = gateway.url
    health_pids = set()
    for _ in range(MAX_TRIES):
        worker = health_on_a_fresh_connection(url)["worker"]
        assert worker["workers"] == WORKERS
        health_pids.add(worker["pid"])
        if len(health_pids) == WORKERS:
            break
    assert len(health_pids) == WORKERS, health_pids

    def jsonrpc() -> None:
        call = {"name": "classify_text", "arguments": {"text": "integrate x squared"}}
        body = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, timeout=60).json()
        assert_valid_classification(body["result"]["structuredContent"], category_count)

    def rest() -> None:
        body = httpx.post(f"{url}/mcp/tools/call", json={"name": "classify_text", "arguments": {"text": "who won at hastings"}}, timeout=60)
        assert_valid_classification(body.json()["structuredContent"], category_count)

    def websocket() -> None:
        from websockets.sync.client import connect

        with connect(url.replace("http://", "ws://") + "/ws", subprotocols=["mcp"], open_timeout=30) as ws:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
            assert {tool["name"] for tool in json.loads(ws.recv(timeout=60))["result"]["tools"]} >= {"classify_text", "list_categories"}

    match = GRPC_LISTENING.search(gateway.log())
    assert match is not None
    grpc_target = match.group(1)

    def public_grpc() -> None:
        with grpc.insecure_channel(grpc_target) as channel:  # a channel is one connection: a fresh one each time
            answer = gpb_grpc.ClassifierGatewayStub(channel).Classify(gpb.ClassifyTextRequest(text="what is 12 squared"), timeout=60)
        assert answer.result.category == "math"

    for door, call in (("http", jsonrpc), ("rest", rest), ("ws", websocket), ("grpc", public_grpc)):
        assert until_both_workers_answered(gateway, door, call) == health_pids, door


def test_an_sse_stream_on_one_worker_gets_the_answers_to_posts_the_other_worker_took(gateway: ServerProcess) -> None:
    url = gateway.url

    async def run() -> tuple[int, set[int]]:
        async with httpx.AsyncClient(timeout=60) as stream_client, stream_client.stream("GET", f"{url}/sse") as stream:
            events = sse_data(stream.aiter_lines())
            endpoint = await anext(events, "")
            assert endpoint.startswith("/messages?sessionId=")
            sent = 0
            for request_id in range(MAX_TRIES):
                async with httpx.AsyncClient(timeout=60) as poster:  # a fresh connection: either worker may take it
                    posted = await poster.post(f"{url}{endpoint}", json={"jsonrpc": "2.0", "id": request_id, "method": "ping"})
                assert posted.status_code == 202
                sent += 1
                if len({line["pid"] for line in access_lines(gateway, "sse")}) == WORKERS:
                    break
            answered: set[int] = set()
            async for data in events:
                answered.add(json.loads(data)["id"])
                if len(answered) == sent:
                    break
            return sent, answered

    sent, answered = asyncio.run(asyncio.wait_for(run(), timeout=300))
    assert answered == set(range(sent)), "every answer reached the stream, whichever worker took its POST"
    assert len({line["pid"] for line in access_lines(gateway, "sse")}) == WORKERS, "both workers took POSTs of the one session"


def test_metrics_on_either_worker_count_the_requests_of_both(gateway: ServerProcess) -> None:
    def rest_total() -> float:
        text = httpx.get(f"{gateway.url}/metrics", timeout=30).text
        return sum(float(count) for door, count in REQUESTS_BY_DOOR.findall(text) if door == "rest")

    before, lines_before = rest_total(), len(access_lines(gateway, "rest"))
    sent = 0
    for _ in range(MAX_TRIES):
        httpx.post(f"{gateway.url}/mcp/ping", json={}, timeout=30).raise_for_status()
        sent += 1
        if sent >= 8 and len({line["pid"] for line in access_lines(gateway, "rest")[lines_before:]}) == WORKERS:
            break
    assert len({line["pid"] for line in access_lines(gateway, "rest")[lines_before:]}) == WORKERS
    scrapes = {rest_total() - before for _ in range(4)}  # several scrapes, on either worker: each shows the sum
    assert scrapes == {float(sent)}


def test_a_categories_reload_reaches_both_workers(gateway: ServerProcess, categories_file: Path) -> None:
    write_with_finance(categories_file)  # each worker watches the file, as a lone gateway does
    reloaded: set[int] = set()

    def both_reloaded() -> bool:
        health = health_on_a_fresh_connection(gateway.url)
        if FINANCE["name"] in health["categories"]:
            reloaded.add(health["worker"]["pid"])
        return len(reloaded) == WORKERS

    assert wait_for(both_reloaded, timeout_s=START_BUDGET.wait_s(), interval_s=0.2), reloaded


def test_sigterm_drains_every_worker_and_the_supervisor_exits_0(gateway: ServerProcess) -> None:
    """Last in the module: it stops the module's gateway."""
    workers = {health_on_a_fresh_connection(gateway.url)["worker"]["pid"] for _ in range(MAX_TRIES)}
    assert len(workers) == WORKERS
    gateway.process.send_signal(signal.SIGTERM)
    assert gateway.process.wait(timeout=120) == 0, gateway.log()[-3000:]
    log = gateway.log()
    assert all(f"Finished server process [{pid}]" in log for pid in workers), log[-3000:]
