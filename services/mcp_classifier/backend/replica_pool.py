"""Where each embedder call goes: one gRPC channel per replica, the next call to the least busy one.

gRPC Python's own balancing policies do not look at load. With ``round_robin`` over the replicas,
calls are handed out in turn, so when the gateway keeps two batches in flight over two replicas, a
batch that finishes early puts the next one on the replica still busy with the slow one while the
other idles; the imbalance then persists. Measured on 2 cores (docs/decisions/0005-replica-routing-least-busy.md): one replica
at 34-46% CPU and the other at 89-92%, and 20-30% fewer requests served at 32 and 64 clients.
grpc-python has no least-request policy outside xDS, so the choice is made here: the replica with
the fewest calls in flight, skipping those whose connection has failed. Among equals, the replica
picked last, if it is one of them (else turns): at light load the calls keep going to one replica,
whose model runs warm. Handed out in turn, each replica ran its forward after twice the idle gap,
and a lone request on the Ray path took 14.3-15.6 ms against 11.5-13.2 (docs/decisions/0005-replica-routing-least-busy.md).
Under load nothing changes: a replica that frees up is the least busy and takes the next call.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc

from ..api.v1 import classifier_pb2_grpc as pb_grpc

ChannelFactory = Callable[[str], grpc.aio.Channel]


@dataclass(eq=False)
class Replica:
    address: str
    channel: grpc.aio.Channel
    stub: pb_grpc.ClassifierStub = field(init=False)
    in_flight: int = 0

    def __post_init__(self) -> None:
        self.stub = pb_grpc.ClassifierStub(self.channel)

    @property
    def failed(self) -> bool:
        """Its connection is known broken: gRPC retries it in the background, calls go elsewhere meanwhile."""
        return self.channel.get_state(try_to_connect=False) == grpc.ChannelConnectivity.TRANSIENT_FAILURE


class ReplicaPool:
    def __init__(self, open_channel: ChannelFactory, close_grace_s: float) -> None:
        self._open_channel = open_channel
        self._close_grace_s = close_grace_s
        self._replicas: dict[str, Replica] = {}
        self._turn = itertools.count()
        self._last_picked: Replica | None = None
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(self._replicas)

    @property
    def calls_in_flight(self) -> dict[str, int]:
        """Per replica: what /health shows, so an operator can see whether calls are spread."""
        return {address: replica.in_flight for address, replica in self._replicas.items()}

    def use(self, addresses: Sequence[str]) -> None:
        """Follow a new list: replicas still listed keep their connection and their count of calls in flight;
        calls already on a dropped replica finish there before its channel closes."""
        kept = {address: self._replicas.pop(address, None) for address in addresses}
        for gone in self._replicas.values():
            self._retire(gone.channel)
        self._replicas = {address: replica or Replica(address, self._open_channel(address)) for address, replica in kept.items()}

    def pick(self, avoid: Iterable[str] = ()) -> Replica:
        """The replica with the fewest calls in flight among those neither failed nor avoided (this call's
        earlier attempts); if every replica is, the least busy of all, so the call still gets an answer."""
        if not self._replicas:
            raise LookupError("no embedder replica is known")
        avoided = set(avoid)
        replicas = list(self._replicas.values())
        healthy = [r for r in replicas if r.address not in avoided and not r.failed]
        candidates = healthy or [r for r in replicas if r.address not in avoided] or replicas
        fewest = min(r.in_flight for r in candidates)
        tied = [r for r in candidates if r.in_flight == fewest]
        if self._last_picked not in tied:
            self._last_picked = tied[next(self._turn) % len(tied)]
        return self._last_picked

    @contextmanager
    def calling(self, replica: Replica) -> Iterator[None]:
        """``replica`` (from ``pick``) counted in flight while a call runs on it."""
        replica.in_flight += 1
        try:
            yield
        finally:
            replica.in_flight -= 1

    async def close(self) -> None:
        """At shutdown: the current channels close now, retiring ones as their grace ends."""
        current, self._replicas = list(self._replicas.values()), {}
        await asyncio.gather(*(replica.channel.close() for replica in current), *self._retiring, return_exceptions=True)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        task = asyncio.create_task(channel.close(grace=self._close_grace_s))
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)
