"""Which replica the gateway's next embedder call goes to (backend/replica_pool.py).

The choice itself is a pure rule, so it is checked here on stand-in channels whose connection state the
test sets; real gRPC servers over loopback check the same behaviour end to end in
tests/integration/test_grpc_replicas.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from mcp_classifier.backend.replica_pool import Replica, ReplicaPool


class StandInChannel:
    """What the pool asks of a channel: its connection state, and to close."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.state = grpc.ChannelConnectivity.READY
        self.closed_with: list[float | None] = []

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self.state

    def unary_unary(self, *args: object, **kwargs: object) -> object:  # the stub's constructor binds its methods
        return object()

    async def close(self, grace: float | None = None) -> None:
        self.closed_with.append(grace)


def each_replica(pool: ReplicaPool) -> dict[str, Replica]:
    """Every replica of the pool, by address: each one picked is made busy so the next pick is another."""
    replicas: dict[str, Replica] = {}
    while len(replicas) < len(pool.addresses):
        replica = pool.pick()
        replica.in_flight += 1
        replicas[replica.address] = replica
    for replica in replicas.values():
        replica.in_flight = 0
    return replicas


def pool_of(*addresses: str) -> tuple[ReplicaPool, dict[str, StandInChannel]]:
    channels: dict[str, StandInChannel] = {}

    def open_channel(address: str) -> grpc.aio.Channel:
        channels[address] = StandInChannel(address)
        return channels[address]  # type: ignore[return-value]  # a stand-in with the methods the pool uses

    pool = ReplicaPool(open_channel, close_grace_s=5.0)
    pool.use(list(addresses))
    return pool, channels


def test_the_replica_with_fewest_calls_in_flight_is_picked() -> None:
    pool, _ = pool_of("a:1", "b:1", "c:1")
    busy = {"a:1": 2, "b:1": 0, "c:1": 1}
    replicas = each_replica(pool)
    for address, calls in busy.items():
        replicas[address].in_flight = calls
    assert pool.pick().address == "b:1"
    replicas["b:1"].in_flight = 3
    assert pool.pick().address == "c:1"


def test_at_light_load_calls_stay_on_the_replica_picked_last() -> None:
    """An idle replica that served the last call keeps its model warm; alternating doubled each one's idle gap."""
    pool, _ = pool_of("a:1", "b:1")
    warm = pool.pick()
    assert all(pool.pick() is warm for _ in range(5))  # each call over before the next: all on one replica
    warm.in_flight = 1
    other = pool.pick()
    assert other is not warm  # busy, so the idle one takes the call, and is now the one picked last
    other.in_flight = 1
    assert pool.pick() is other  # equally busy: still the one picked last
    other.in_flight = 2
    assert pool.pick() is warm  # fewest calls in flight comes first


def test_a_failed_replica_is_skipped_however_idle_unless_every_replica_has_failed() -> None:
    pool, channels = pool_of("a:1", "b:1")
    channels["a:1"].state = grpc.ChannelConnectivity.TRANSIENT_FAILURE
    for replica in (pool.pick(), pool.pick()):
        replica.in_flight = 5  # b is busy, a idle but failed
    assert {pool.pick().address for _ in range(4)} == {"b:1"}
    channels["b:1"].state = grpc.ChannelConnectivity.TRANSIENT_FAILURE
    assert pool.pick().address in {"a:1", "b:1"}  # nothing healthy: still an answer to try


def test_a_retry_avoids_the_replicas_its_call_already_tried() -> None:
    pool, _ = pool_of("a:1", "b:1", "c:1")
    assert pool.pick(avoid=["a:1", "b:1"]).address == "c:1"
    assert pool.pick(avoid=["a:1", "b:1", "c:1"]).address in {"a:1", "b:1", "c:1"}


def test_a_new_list_keeps_the_connections_still_listed_and_closes_the_others_with_grace() -> None:
    async def scenario() -> None:
        pool, channels = pool_of("a:1", "b:1")
        kept = each_replica(pool)["b:1"]
        kept.in_flight = 1
        first_b = channels["b:1"]
        pool.use(["b:1", "c:1"])
        assert pool.addresses == ("b:1", "c:1")
        assert channels["b:1"] is first_b and pool.pick(avoid=["c:1"]) is kept and kept.in_flight == 1
        await asyncio.sleep(0)
        assert channels["a:1"].closed_with == [5.0] and first_b.closed_with == []
        await pool.close()
        assert first_b.closed_with == [None] and channels["c:1"].closed_with == [None]

    asyncio.run(scenario())


def test_an_empty_pool_says_so() -> None:
    pool, _ = pool_of()
    with pytest.raises(LookupError):
        pool.pick()


@contextmanager
def call(pool: ReplicaPool) -> Iterator[Replica]:
    """A call as the gateway makes one: the pool picks a replica, then counts the call on it while it runs."""
    replica = pool.pick()
    with pool.calling(replica):
        yield replica


def test_calls_in_flight_spread_over_the_replicas_and_are_counted_while_they_run() -> None:
    pool, _ = pool_of("a:1", "b:1")
    with call(pool) as first, call(pool) as second:
        assert first is not second
        assert first.in_flight == second.in_flight == 1
    assert first.in_flight == second.in_flight == 0
