"""Which cores a CPU replica takes, when pinning is safe, and real thread affinities (in a child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mcp_classifier.embedder.cpu_pinning import choose_replica_cores, pinning_applies, replica_cpus


def test_each_replica_of_a_node_takes_its_own_slice_of_the_allowed_cores() -> None:
    allowed = [3, 1, 0, 2]  # as the kernel may list them
    assert [replica_cpus(allowed, rank, 1.0) for rank in range(4)] == [[0], [1], [2], [3]]
    assert [replica_cpus(allowed, rank, 2.0) for rank in range(2)] == [[0, 1], [2, 3]]
    assert replica_cpus(allowed, 0, 1.5) == [0, 1]  # a part CPU still runs on a whole core


def test_no_slice_past_the_allowed_cores_or_for_replicas_that_share_a_core() -> None:
    assert replica_cpus([0, 1], 2, 1.0) is None  # a third replica on two cores: the kernel spreads it better
    assert replica_cpus([0, 1, 2], 1, 2.0) is None
    assert replica_cpus([0, 1], 0, 0.5) is None  # fractional replicas share cores
    assert replica_cpus([0, 1], 0, 0.0) is None
    assert replica_cpus([0, 1], -1, 1.0) is None


def test_auto_pins_only_where_the_process_sees_no_more_cores_than_ray_was_given() -> None:
    assert pinning_applies("auto", 2, 2.0)  # the embedded 2-core node; a pod with exclusive cores
    assert pinning_applies("auto", 4, 6.0)
    assert not pinning_applies("auto", 64, 2.0)  # a pod limited to 2 CPUs on a shared 64-core machine
    assert not pinning_applies("auto", 2, 0.0)  # Ray's node resources not known
    assert pinning_applies("on", 64, 2.0)
    assert not pinning_applies("off", 2, 2.0)


CHILD = textwrap.dedent(
    """
    import json, os, threading
    from mcp_classifier.embedder.cpu_pinning import pin_process

    allowed = sorted(os.sched_getaffinity(0))
    stop = threading.Event()
    early = threading.Thread(target=stop.wait)  # a thread that was running before the pin
    early.start()
    pinned = pin_process(allowed[:1])
    masks = {}

    def record(name):
        masks[name] = sorted(os.sched_getaffinity(0))

    late = threading.Thread(target=record, args=("started after the pin",))
    late.start(); late.join()
    record("the pinning thread")
    masks["the early thread"] = sorted(os.sched_getaffinity(early.native_id))
    stop.set(); early.join()
    print(json.dumps({"allowed": allowed, "pinned": pinned, "masks": masks}))
    """
)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to one of them")
def test_a_pinned_process_keeps_every_thread_on_its_cores() -> None:
    # A child process: pinning this one would put the rest of the test session on one core.
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout)
    allowed, masks = result["allowed"], result["masks"]
    assert result["pinned"] >= 2  # the main thread and the early one at least
    assert masks["the early thread"] == allowed[:1]
    assert masks["started after the pin"] == allowed[:1]
    assert masks["the pinning thread"] == allowed[:1]


def _lookups(node_cpus: float = 2.0, rank: int = 1, assigned: float = 1.0) -> dict:
    return {"node_cpus": lambda: node_cpus, "local_rank": lambda: rank, "assigned_cpus": lambda: assigned}


def test_a_replica_takes_the_slice_of_its_rank_where_the_nodes_cores_are_rays_alone() -> None:
    assert choose_replica_cores("auto", [0, 1], **_lookups()) == [1]
    assert choose_replica_cores("auto", list(range(64)), **_lookups(node_cpus=2.0)) is None  # a shared machine's cores
    assert choose_replica_cores("on", list(range(64)), **_lookups(node_cpus=2.0)) == [1]
    assert choose_replica_cores("off", [0, 1], **_lookups()) is None
    assert choose_replica_cores("auto", [0, 1], **_lookups(rank=2)) is None  # more replicas than cores


def test_a_failed_lookup_leaves_the_replica_unpinned_and_serving(caplog: pytest.LogCaptureFixture) -> None:
    def unreachable() -> float:
        raise ConnectionError("GCS unreachable")

    lookups = _lookups() | {"node_cpus": unreachable}
    assert choose_replica_cores("auto", [0, 1], **lookups) is None
    assert "replica not pinned: GCS unreachable" in caplog.text
