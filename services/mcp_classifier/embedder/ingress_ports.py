"""Direct-ingress ports of the embedded node: a block of Serve's windows that no other node on this host uses.

Serve gives the replicas of every node the same first ports (HTTP from 30000, gRPC from 40000).
A second embedded node on one host (two `serve --backend ray`, a test beside a developer's
server) therefore asks for ports the first node's replicas hold. Its HTTP servers find them taken
and move on, but the replicas' gRPC servers keep SO_REUSEPORT on: Ray passes gRPC the option as
the string "0", which gRPC ignores (ray-project/ray#64623 says so; rayfed#124 met the same), so
the second node's replica binds the first one's port beside it, and the kernel hands each of the
gateway's connections to either node. The second service's requests are then answered by the
first service's replicas, with its categories, and nothing fails to show it.

So the embedded node takes a block of each window of its own, one where nothing holds any port at
start, and tells Serve through its environment variables, which every Ray process of the node
inherits. Written here because Serve has no per-node choice of these windows.

Where those servers listen is Serve's choice too: its gRPC proxy, the replicas' direct-ingress gRPC
servers and their inter-deployment gRPC server all bind ``[::]``, every address of the host,
whatever the node's IP. On an embedded node behind a loopback gateway, that lets anyone who reaches
the host call the replicas past the gateway's keys, Host/Origin checks and rate limit. Serve offers
no setting for it, so every worker of such a node runs ``bind_grpc_servers_to_node_ip`` before its
actor starts (Ray's worker_process_setup_hook): a wildcard bind becomes a bind to the node's IP.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

# Serve's own windows (ray.serve._private.constants, RAY_SERVE_DIRECT_INGRESS_{MIN,MAX}_{HTTP,GRPC}_PORT's
# defaults): the block comes from inside them, where Serve's users already expect these ports.
SERVE_WINDOWS: dict[str, range] = {"HTTP": range(30000, 31000), "GRPC": range(40000, 41000)}
MIN_BLOCK_PORTS = 32
# Ports a replica can use up: its own, one more each time it is replaced (Serve keeps a freed port out
# of use for minutes, and skips one it found taken), and room for a resize while old replicas drain.
PORTS_PER_REPLICA = 8


def env_names(protocol: str) -> tuple[str, str]:
    return f"RAY_SERVE_DIRECT_INGRESS_MIN_{protocol}_PORT", f"RAY_SERVE_DIRECT_INGRESS_MAX_{protocol}_PORT"


def block_size(max_replicas: int) -> int:
    return max(MIN_BLOCK_PORTS, PORTS_PER_REPLICA * max_replicas)


def free_block(window: range, size: int, bindable: Callable[[int], bool], rng: random.Random) -> range | None:
    """A block of ``size`` ports inside ``window``, every one of them bindable now; blocks tried in random order.

    Random, not lowest first, so two nodes starting at the same moment (neither has bound a port
    yet) rarely take the same block.
    """
    starts = list(range(window.start, window.stop - size + 1, size))
    rng.shuffle(starts)
    for start in starts:
        block = range(start, start + size)
        if all(bindable(port) for port in block):
            return block
    return None


def node_port_env(
    max_replicas: int,
    bindable: Callable[[int], bool],
    environ: Mapping[str, str],
    windows: Mapping[str, range] = SERVE_WINDOWS,
    rng: random.Random | None = None,
) -> dict[str, str]:
    """The environment variables that give this node's replicas a block of each window of their own.

    Empty where the operator set any of Serve's variables (theirs stand), and for a window with no
    free block (Serve's own window then, and a warning: a second node may share its ports).
    """
    names = [name for protocol in windows for name in env_names(protocol)]
    if set_by_operator := [name for name in names if name in environ]:
        log.info("direct-ingress ports as set in the environment (%s)", ", ".join(set_by_operator))
        return {}
    pick = rng or random.SystemRandom()
    size = block_size(max_replicas)
    env: dict[str, str] = {}
    for protocol, window in windows.items():
        block = free_block(window, size, bindable, pick)
        if block is None:
            log.warning(
                "no %d free %s ports in a block of %d-%d: the replicas take Serve's own window, which another Ray node "
                "on this host may share",
                size,
                protocol,
                window.start,
                window.stop - 1,
            )
            continue
        low, high = env_names(protocol)
        env[low], env[high] = str(block.start), str(block.stop)  # Serve allocates from range(min, max)
        log.info("the replicas' direct-ingress %s ports: %d-%d", protocol, block.start, block.stop - 1)
    return env


# Hosts a gRPC server address uses for "every address": Serve writes "[::]", others "0.0.0.0" or none.
WILDCARD_HOSTS = frozenset({"[::]", "::", "0.0.0.0", ""})
_REBOUND_MARK = "_mcp_classifier_node_bound"


def node_bound(address: str, node_ip: str) -> str:
    """``address`` with a wildcard host replaced by ``node_ip``; one that names its host was chosen on purpose and stays."""
    host, sep, port = address.rpartition(":")
    if not sep or host not in WILDCARD_HOSTS or not port.isdigit():
        return address
    return f"[{node_ip}]:{port}" if ":" in node_ip else f"{node_ip}:{port}"


def bind_grpc_servers_to_node_ip(node_ip: str | None = None) -> None:
    """Make every gRPC server this process opens from now on listen on the node's IP, not on every address.

    Run by Ray in each worker of the embedded node before its actor is created (the node's
    runtime_env names it as worker_process_setup_hook), so it covers the servers Serve binds to
    ``[::]`` with no setting to change it. Patched on gRPC's server classes rather than Serve's
    helpers: a server a later Serve opens through another helper is covered too. A second call
    changes nothing.
    """
    import grpc._server
    import grpc.aio._server

    if node_ip is None:
        import ray

        node_ip = str(ray.util.get_node_ip_address())
    for server_class in (grpc.aio._server.Server, grpc._server._Server):
        for name in ("add_insecure_port", "add_secure_port"):
            original = getattr(server_class, name)
            if not getattr(original, _REBOUND_MARK, False):
                setattr(server_class, name, _rebinding(original, node_ip))


def _rebinding(original: Callable[..., int], node_ip: str) -> Callable[..., int]:
    @functools.wraps(original)
    def add_port(server: Any, address: str, *args: Any, **kwargs: Any) -> int:
        bound = node_bound(address, node_ip)
        if bound != address:
            log.debug("gRPC server asked for %s: listening on %s (the node's IP)", address, bound)
        return original(server, bound, *args, **kwargs)

    setattr(add_port, _REBOUND_MARK, True)
    return add_port
