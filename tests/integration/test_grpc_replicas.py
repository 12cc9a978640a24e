"""The gateway calling the embedder replicas directly (Serve direct ingress): spread, followed, failed over.

Real gRPC over loopback: each "replica" is an in-process gRPC server speaking the embedder's API and
answering with its own name as the category, so a test sees which replica served each call. The
replica list is handed to the gateway's client the way Serve publishes it (target groups); the
Serve side itself runs in tests/e2e/test_ray_stack.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from ray.serve._private.common import RequestProtocol
from ray.serve.schema import Target, TargetGroup

from mcp_classifier.api.convert import info_to_proto, results_to_proto
from mcp_classifier.api.v1 import classifier_pb2 as pb
from mcp_classifier.api.v1 import classifier_pb2_grpc as pb_grpc
from mcp_classifier.backend.coalescer import BatchingOptions
from mcp_classifier.backend.grpc_client import GrpcBackend
from mcp_classifier.classify.registry import UnknownClassifier
from mcp_classifier.classify.results import ClassificationResult
from mcp_classifier.embedder.replica_targets import grpc_targets, serve_api_target_source
from tests.support.fake_backend import FakeBackend

APP = "mcp-classifier"
REFRESH_S = 0.05
BATCHING = BatchingOptions(batch_size=32, batch_window_ms=0.0, max_queue=100, max_concurrent_batches=2)


HELD = "hold:"  # a text starting so is answered only once the replica's `release` is set: a replica busy with a long batch


class NamedReplica(pb_grpc.ClassifierServicer):
    """Answers every text with its own name as the category."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = asyncio.Event()
        self.holding = 0
        self.calls = 0
        self.server = grpc.aio.server()
        pb_grpc.add_ClassifierServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"

    async def Classify(self, request: pb.ClassifyRequest, context: Any) -> pb.ClassifyResponse:
        self.calls += 1
        if any(text.startswith(HELD) for text in request.texts):
            self.holding += 1
            await self.release.wait()
        result = ClassificationResult(0, self.name, 1.0, "m", False, (1.0,), 0.0)
        return pb.ClassifyResponse(results=results_to_proto([result] * len(request.texts), True), category_set_version="v1")

    async def Info(self, request: pb.InfoRequest, context: Any) -> pb.InfoResponse:
        return info_to_proto(FakeBackend().classifier_info())


def client(
    listing: list[str] | Exception | Callable[[], Awaitable[list[str]]],
    fallback: str = "127.0.0.1:1",
) -> GrpcBackend:
    async def replicas() -> list[str]:
        if isinstance(listing, Exception):
            raise listing
        return list(listing)

    return GrpcBackend(
        fallback,
        app_name=APP,
        timeout_s=5.0,
        max_attempts=4,
        batching=BATCHING,
        replicas=listing if callable(listing) else replicas,
        replica_refresh_s=REFRESH_S,
    )


async def served_by(backend: GrpcBackend, calls: int) -> list[str]:
    return [(await backend.predict([f"text {i}"]))[0].category for i in range(calls)]


def test_calls_spread_over_the_listed_replicas_and_follow_the_list_as_it_changes() -> None:
    async def scenario() -> None:
        a, b, c = NamedReplica("a"), NamedReplica("b"), NamedReplica("c")
        for replica in (a, b, c):
            await replica.server.start()
        listing = [a.address, b.address]
        backend = client(listing)
        await backend.start()
        try:
            assert backend.addresses == tuple(sorted([a.address, b.address]))
            first = await served_by(backend, 20)
            assert len(set(first)) == 1 and first[0] in {"a", "b"}, first  # one call at a time: the warm replica keeps them
            held = asyncio.create_task(backend.predict([HELD + "a long batch"]))
            # Whichever replica took the long batch (the warm one, unless a slow box made a refresh or a
            # failover pick the other): bounded, so a lost call fails here instead of hanging the run.
            async with asyncio.timeout(10):
                while a.holding + b.holding == 0:
                    await asyncio.sleep(0.01)
            busy, idle = (a, b) if a.holding else (b, a)
            assert set(await served_by(backend, 5)) == {idle.name}  # one busy: the idle one takes the calls
            busy.release.set()
            assert (await held)[0].category == busy.name

            listing[:] = [c.address]  # a scale-down and a replacement elsewhere
            await asyncio.sleep(REFRESH_S * 6)
            assert backend.addresses == (c.address,)
            assert set(await served_by(backend, 10)) == {"c"}
        finally:
            await backend.close()
            for replica in (a, b, c):
                await replica.server.stop(None)

    asyncio.run(scenario())


def test_calls_go_to_the_idle_replica_while_the_other_is_busy_with_a_long_batch() -> None:
    """With calls handed out in turn (gRPC's round_robin), every other call would queue behind the long one."""

    async def scenario() -> None:
        a, b = NamedReplica("a"), NamedReplica("b")
        for replica in (a, b):
            await replica.server.start()
        backend = client([a.address, b.address])
        await backend.start()
        try:
            await served_by(backend, 4)
            long_batch = asyncio.create_task(backend.predict([HELD + "a long batch"]))
            async with asyncio.timeout(10):  # a lost call fails here instead of hanging the run
                while a.holding + b.holding == 0:
                    await asyncio.sleep(0.01)
            busy, idle = (a, b) if a.holding else (b, a)
            assert backend.calls_in_flight == {busy.address: 1, idle.address: 0}  # what /health shows
            served = await asyncio.wait_for(served_by(backend, 12), timeout=3.0)
            assert served == [idle.name] * 12
            busy.release.set()
            assert (await long_batch)[0].category == busy.name
        finally:
            await backend.close()
            for replica in (a, b):
                await replica.server.stop(None)

    asyncio.run(scenario())


def test_a_replica_that_dies_is_skipped_before_the_list_says_so_and_no_call_fails() -> None:
    async def scenario() -> None:
        a, b = NamedReplica("a"), NamedReplica("b")
        await a.server.start()
        await b.server.start()
        backend = client([a.address, b.address])
        await backend.start()
        try:
            served = await served_by(backend, 10)
            dead, alive = (a, b) if served[0] == "a" else (b, a)
            await dead.server.stop(None)  # the replica taking the calls is killed; Serve's list still names it
            assert set(await served_by(backend, 20)) == {alive.name}
        finally:
            await backend.close()
            await alive.server.stop(None)

    asyncio.run(scenario())


def test_an_unreadable_list_falls_back_to_the_given_address_then_keeps_the_last_known() -> None:
    async def scenario() -> None:
        proxy, replica = NamedReplica("proxy"), NamedReplica("replica")
        await proxy.server.start()
        await replica.server.start()
        unreadable = client(ConnectionError("Serve API down"), fallback=proxy.address)
        await unreadable.start()
        try:
            assert set(await served_by(unreadable, 3)) == {"proxy"}
        finally:
            await unreadable.close()

        listing: list[str] = [replica.address]
        backend = client(listing)
        await backend.start()
        try:
            listing.clear()  # Serve lists nothing for a moment: keep calling the replica already known
            await asyncio.sleep(REFRESH_S * 4)
            assert set(await served_by(backend, 3)) == {"replica"}
        finally:
            await backend.close()
            await proxy.server.stop(None)
            await replica.server.stop(None)

    asyncio.run(scenario())


def test_a_cancel_that_lands_as_a_listing_completes_still_ends_the_follower() -> None:
    """close() cancels the follower and waits for it. Python 3.11's wait_for returned a listing that
    completed just as the cancel landed and swallowed the cancel: the follower ran on and close() waited
    forever (a CI run hung 300 s in the test below). Here the cancel lands inside the listing itself."""

    async def scenario() -> None:
        replica = NamedReplica("a")
        await replica.server.start()
        calls = 0

        async def replicas() -> list[str]:
            nonlocal calls
            calls += 1
            if calls == 3:  # the follower's second refresh (the first listing is start()'s own)
                follower.cancel()
            return [replica.address]

        backend = client(replicas)
        await backend.start()
        follower = next(t for t in asyncio.all_tasks() if t.get_name() == "grpc-replica-follower")
        try:
            async with asyncio.timeout(5):
                await asyncio.gather(follower, return_exceptions=True)
            assert follower.cancelled() and calls == 3
            assert set(await served_by(backend, 3)) == {"a"}  # the replicas already known still answer
        finally:
            async with asyncio.timeout(5):
                await backend.close()
            await replica.server.stop(None)

    asyncio.run(scenario())


def test_a_list_that_hangs_is_given_up_on_and_later_changes_are_still_followed() -> None:
    async def scenario() -> None:
        a, b = NamedReplica("a"), NamedReplica("b")
        await a.server.start()
        await b.server.start()
        hang = asyncio.Event()
        listing = [a.address]

        async def replicas() -> list[str]:
            if hang.is_set():
                await asyncio.Event().wait()  # a Serve API that never answers
            return list(listing)

        backend = GrpcBackend(
            a.address, app_name=APP, timeout_s=5.0, max_attempts=4, batching=BATCHING, replicas=replicas, replica_refresh_s=REFRESH_S
        )
        await backend.start()
        try:
            hang.set()
            await asyncio.sleep(1.5)  # past the bounded wait (at least READY_PROBE_TIMEOUT_S)
            assert set(await served_by(backend, 5)) == {"a"}
            listing[:] = [b.address]
            hang.clear()
            deadline = asyncio.get_running_loop().time() + 3.0
            while backend.addresses != (b.address,) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(REFRESH_S)
            assert set(await served_by(backend, 5)) == {"b"}
        finally:
            await backend.close()
            await a.server.stop(None)
            await b.server.stop(None)

    asyncio.run(scenario())


def serve_target_groups() -> list[TargetGroup]:
    """Shaped by Ray Serve's own schema classes, as the controller publishes them."""

    def targets(*ports: int) -> list[Target]:
        return [Target(ip="10.0.0.7", port=port, instance_id="", name=f"SERVE_REPLICA::{APP}#Embedder#{port}") for port in ports]

    return [
        TargetGroup(targets=targets(30000, 30001), route_prefix="/", protocol=RequestProtocol.HTTP, app_name=APP),
        TargetGroup(targets=targets(40001, 40000), route_prefix="/", protocol=RequestProtocol.GRPC, app_name=APP),
        TargetGroup(targets=targets(40005), route_prefix="/other", protocol=RequestProtocol.GRPC, app_name="other-app"),
    ]


@pytest.mark.parametrize("mode", ["python", "json"])
def test_the_grpc_targets_of_this_app_are_read_from_serves_target_groups(mode: str) -> None:
    details = {"target_groups": [group.model_dump(mode=mode) for group in serve_target_groups()]}
    assert grpc_targets(details, APP) == ["10.0.0.7:40000", "10.0.0.7:40001"]
    assert grpc_targets({"applications": {}}, APP) == []


RAY_TOKEN = "ray-token-from-a-secret-5f2c"
REQUIRE_TOKEN = threading.Event()  # set: the stand-in answers 401 without RAY_TOKEN, as Ray's token auth does


@pytest.fixture
def serve_api() -> Iterator[str]:
    """A loopback HTTP server standing in for the Ray dashboard's Serve REST API (no dashboard runs here)."""
    document = json.dumps({"applications": {}, "target_groups": [g.model_dump(mode="json") for g in serve_target_groups()]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if REQUIRE_TOKEN.is_set() and self.headers.get("Authorization") != f"Bearer {RAY_TOKEN}":
                self.send_response(401)
                self.end_headers()
                return
            found = self.path == "/api/serve/applications/"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(document if found else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def test_a_cluster_gateway_reads_the_replicas_from_the_serve_rest_api(serve_api: str) -> None:
    source = serve_api_target_source(serve_api + "/", APP, timeout_s=2.0)
    assert asyncio.run(source()) == ["10.0.0.7:40000", "10.0.0.7:40001"]


def test_a_token_protected_cluster_is_listed_with_the_token_from_its_file(serve_api: str, tmp_path: Path) -> None:
    token_file = tmp_path / "auth_token"
    token_file.write_text("stale-token\n")
    REQUIRE_TOKEN.set()
    try:
        without = serve_api_target_source(serve_api, APP, timeout_s=2.0)
        with pytest.raises(httpx.HTTPStatusError):
            asyncio.run(without())
        source = serve_api_target_source(serve_api, APP, timeout_s=2.0, token_file=token_file)
        with pytest.raises(httpx.HTTPStatusError):
            asyncio.run(source())  # the wrong token is refused too
        token_file.write_text(RAY_TOKEN + "\n")  # the Secret rotated: read again on the next listing
        assert asyncio.run(source()) == ["10.0.0.7:40000", "10.0.0.7:40001"]
    finally:
        REQUIRE_TOKEN.clear()


def test_light_load_stays_on_one_warm_replica_and_a_call_made_beside_a_busy_one_goes_to_the_other() -> None:
    async def scenario() -> None:
        a, b = NamedReplica("a"), NamedReplica("b")
        for replica in (a, b):
            await replica.server.start()
        backend = client([a.address, b.address])
        await backend.start()
        try:
            served = await served_by(backend, 3)  # one at a time: the last-picked replica keeps them, its model warm
            assert len(set(served)) == 1
            warm, other = (a, b) if served[0] == "a" else (b, a)
            held = asyncio.create_task(backend.predict([HELD + "a long batch"]))
            async with asyncio.timeout(10):  # a call that went elsewhere fails here instead of hanging the run
                while warm.holding == 0:
                    await asyncio.sleep(0.01)
            assert (await backend.predict(["made meanwhile"]))[0].category == other.name  # not queued behind it
            warm.release.set()
            assert (await held)[0].category == warm.name
            assert (warm.calls, other.calls) == (4, 1)
        finally:
            await backend.close()
            for replica in (a, b):
                await replica.server.stop(None)

    asyncio.run(scenario())


class ClassifiersReplica(pb_grpc.ClassifierServicer):
    """Serves the default classifier and ``complexity`` as a replica does (embedder/deployment.py): each answer names
    the classifier asked, and an unknown name is NOT_FOUND."""

    NAMES = ("default", "complexity")

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.server = grpc.aio.server()
        pb_grpc.add_ClassifierServicer_to_server(self, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    async def Classify(self, request: pb.ClassifyRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.ClassifyResponse:
        name = request.classifier or "default"
        if name not in self.NAMES:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no classifier named {name!r}")
        self.asked.append((name, list(request.texts)))
        results = [ClassificationResult(0, f"{name}:{text}", 1.0, "m", False, (1.0,), 0.0) for text in request.texts]
        return pb.ClassifyResponse(results=results_to_proto(results, True), category_set_version=f"v-{name}")

    async def Info(self, request: pb.InfoRequest, context: grpc.aio.ServicerContext[Any, Any]) -> pb.InfoResponse:
        info = info_to_proto(FakeBackend().classifier_info())
        info.category_set_version = f"v-{request.classifier or 'default'}"
        info.classifiers.extend(self.NAMES)
        return info


def test_named_classifiers_travel_to_the_replicas_each_batch_split_by_classifier_and_health_lists_each() -> None:
    async def scenario() -> None:
        replica = ClassifiersReplica()
        await replica.server.start()
        backend = GrpcBackend(
            replica.address,
            app_name=APP,
            timeout_s=5.0,
            max_attempts=1,
            batching=BatchingOptions(batch_size=32, batch_window_ms=50.0, max_queue=100, max_concurrent_batches=1),
        )
        await backend.start()
        try:
            health = await backend.health(need_info=True)
            assert {name: info.category_set_version for name, info in health.every_info().items()} == {
                "default": "v-default",
                "complexity": "v-complexity",
            }
            default, named = await asyncio.gather(backend.predict(["a", "b"]), backend.predict(["c"], "complexity"))
            assert [r.category for r in default] == ["default:a", "default:b"]
            assert [r.category for r in named] == ["complexity:c"]
            assert sorted(replica.asked) == [("complexity", ["c"]), ("default", ["a", "b"])]  # one call per classifier
            with pytest.raises(UnknownClassifier, match="known: default, complexity"):
                await backend.predict(["d"], "billing")
        finally:
            await backend.close()
            await replica.server.stop(None)

    asyncio.run(scenario())
