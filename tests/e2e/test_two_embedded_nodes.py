"""Two `serve --backend ray` on one host: each gateway is answered by its own replicas, never the other's.

Serve gives every node's replicas the same first direct-ingress ports, and its replicas' gRPC
servers leave SO_REUSEPORT on, so a second node's replica used to bind the first one's port beside
it and the kernel handed the second gateway's connection to either service (found when a leftover
server answered a benchmark's requests). Each embedded node now takes a block of ports of its own
(mcp_classifier.embedder.ingress_ports). Two real servers with different categories show it: the
first has the five defaults, the second a sixth (finance), so every answer says whose replica
computed it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import assert_valid_classification
from tests.support.categories import FINANCE_QUERY, write_with_finance
from tests.support.processes import ServerProcess, start_server

pytestmark = [pytest.mark.slow, pytest.mark.embedded_ray]

CALLS = 12
QUERIES = [FINANCE_QUERY, "how do index funds work and what do they cost", "write a python function that reverses a string"]


def _start(tmp_path: Path, *extra: str) -> ServerProcess:
    return start_server(
        tmp_path,
        "--backend",
        "ray",
        "--no-cache",
        "--min-replicas",
        "1",
        "--max-replicas",
        "1",
        *extra,
        env={"RAY_AUTH_MODE": "disabled"},
    )


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    first = _start(tmp_path_factory.mktemp("first"))
    try:
        categories = tmp_path_factory.mktemp("second-categories") / "categories.yaml"
        write_with_finance(categories)
        second = _start(tmp_path_factory.mktemp("second"), "--categories-file", str(categories))
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _replicas(server: ServerProcess) -> set[str]:
    embedder = httpx.get(f"{server.url}/health", timeout=10).json()["embedder"]
    assert embedder["direct_ingress"] is True, embedder
    return set(embedder["addresses"])


def _category_counts(server: ServerProcess) -> list[int]:
    """How many categories each answer scored: whose categories (and so whose replica) computed it."""
    counts = []
    for i in range(CALLS):
        response = httpx.post(
            f"{server.url}/mcp/tools/call",
            json={"name": "classify_text", "arguments": {"text": QUERIES[i % len(QUERIES)], "with_probabilities": True}},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        counts.append(len(response.json()["structuredContent"]["probabilities"]))
    return counts


def test_the_two_nodes_replicas_listen_on_different_ports(two_nodes: tuple[ServerProcess, ServerProcess]) -> None:
    first, second = two_nodes
    first_replicas, second_replicas = _replicas(first), _replicas(second)
    assert first_replicas and second_replicas
    assert not first_replicas & second_replicas, (first_replicas, second_replicas)


def test_each_gateway_is_answered_with_its_own_categories(two_nodes: tuple[ServerProcess, ServerProcess], category_count: int) -> None:
    first, second = two_nodes
    assert _category_counts(second) == [category_count + 1] * CALLS
    assert _category_counts(first) == [category_count] * CALLS
    finance = httpx.post(
        f"{second.url}/mcp/tools/call",
        json={"name": "classify_text", "arguments": {"text": FINANCE_QUERY, "with_probabilities": True}},
        timeout=30,
    ).json()["structuredContent"]
    assert_valid_classification(finance, category_count + 1)
    assert finance["class"] == category_count  # finance, the sixth: only the second node's replica knows it
