"""The embedded node's direct-ingress ports: a block of Serve's windows where nothing holds a port.

The rule is checked with a stand-in for "is this port free" (deterministic blocks); that the real
check sees a port held the way a Serve replica's gRPC server holds it is checked on a real gRPC
server. Two real embedded nodes on one host: tests/e2e/test_embedded_node.py.
"""

from __future__ import annotations

import asyncio
import logging
import random

import grpc
import pytest

from mcp_classifier.embedder import ingress_ports
from mcp_classifier.embedder.ingress_ports import block_size, env_names, free_block, node_port_env
from mcp_classifier.embedder.local_cluster import bindable_everywhere

WINDOWS = {"HTTP": range(1000, 1064), "GRPC": range(2000, 2064)}  # two blocks of 32 each


def _free_except(*held: int):
    return lambda port: port not in held


def _blocks(env: dict[str, str]) -> dict[str, range]:
    return {p: range(int(env[env_names(p)[0]]), int(env[env_names(p)[1]])) for p in ("HTTP", "GRPC") if env_names(p)[0] in env}


def test_each_protocol_gets_a_whole_block_of_its_window_for_serve_to_allocate_from() -> None:
    env = node_port_env(2, _free_except(), environ={}, windows=WINDOWS, rng=random.Random(1))
    blocks = _blocks(env)
    assert set(blocks) == {"HTTP", "GRPC"}
    for protocol, block in blocks.items():
        assert len(block) == block_size(2) == 32
        assert block.start in (WINDOWS[protocol].start, WINDOWS[protocol].start + 32)  # a whole aligned block
    assert set(env) == {*env_names("HTTP"), *env_names("GRPC")}


@pytest.mark.parametrize("seed", range(8))
def test_a_block_with_any_port_held_is_passed_over(seed: int) -> None:
    """A node already running holds a port or two of its block: the next node never takes that block."""
    held_http, held_grpc = 1000 + 31, 2000 + 40  # the last port of the first HTTP block; one inside the second gRPC block
    env = node_port_env(2, _free_except(held_http, held_grpc), environ={}, windows=WINDOWS, rng=random.Random(seed))
    assert _blocks(env) == {"HTTP": range(1032, 1064), "GRPC": range(2000, 2032)}


def test_blocks_are_tried_in_random_order_so_two_nodes_starting_together_rarely_meet() -> None:
    window = range(40000, 41000)
    starts = {free_block(window, 32, _free_except(), random.Random(seed)).start for seed in range(40)}  # type: ignore[union-attr]
    assert len(starts) > 20


def test_more_replicas_get_a_bigger_block() -> None:
    assert block_size(1) == block_size(4) == ingress_ports.MIN_BLOCK_PORTS
    assert block_size(16) == 16 * ingress_ports.PORTS_PER_REPLICA


def test_ports_the_operator_set_stand(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ingress_ports.__name__)
    environ = {"RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT": "45000"}
    assert node_port_env(2, _free_except(), environ=environ, windows=WINDOWS) == {}
    assert "RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT" in caplog.text


def test_a_window_with_no_free_block_is_left_to_serve_and_said(caplog: pytest.LogCaptureFixture) -> None:
    every_grpc_block_touched = _free_except(2003, 2050)
    env = node_port_env(2, every_grpc_block_touched, environ={}, windows=WINDOWS, rng=random.Random(0))
    assert set(_blocks(env)) == {"HTTP"}
    assert "no 32 free GRPC ports" in caplog.text and "may share" in caplog.text


def test_a_port_held_the_way_a_serve_replica_holds_it_is_not_free() -> None:
    """Serve's replica gRPC servers are built with ("grpc.so_reuseport", "0"), which leaves SO_REUSEPORT on: a
    second such server binds the same port (the cross-talk this module prevents). The check the block is chosen
    by still sees the port as taken."""

    async def run() -> tuple[int, int, bool]:
        first = grpc.aio.server(options=[("grpc.so_reuseport", "0")])
        port = first.add_insecure_port("[::]:0")
        await first.start()
        second = grpc.aio.server(options=[("grpc.so_reuseport", "0")])
        try:
            return port, second.add_insecure_port(f"[::]:{port}"), bindable_everywhere(port)
        finally:
            await first.stop(None)

    port, second_port, free = asyncio.run(run())
    assert second_port == port  # the second server shares the port: why a block of its own matters
    assert not free
