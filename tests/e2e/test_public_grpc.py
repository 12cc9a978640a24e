"""The gateway's public gRPC API against a real gateway process, with a client generated from protos/.

What a high-volume caller relies on: the three methods answer as the MCP tools do, the bearer key
in metadata is required, health answers SERVING, reflection lists the service when enabled, and
failures carry the table's status with an event id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from mcp_classifier.api.v1 import classifier_pb2 as pb
from mcp_classifier.api.v1 import gateway_pb2 as gpb
from mcp_classifier.api.v1 import gateway_pb2_grpc as gpb_grpc
from tests.support import API_KEY_IN_FILE
from tests.support.processes import ServerProcess, start_server

GRPC_LISTENING = re.compile(r"gRPC API listening on (\S+):(\d+)")
KEY = (("authorization", f"Bearer {API_KEY_IN_FILE}"),)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, keys_file: Path) -> Iterator[tuple[ServerProcess, str]]:
    server = start_server(tmp_path_factory.mktemp("grpc"), "--grpc-port", "0", "--grpc-reflection", "--api-keys-file", str(keys_file))
    deadline = time.monotonic() + 30
    match = None
    while match is None and time.monotonic() < deadline:
        match = GRPC_LISTENING.search(server.log())
        time.sleep(0.1)
    assert match is not None, server.log()[-2000:]
    yield server, f"{match.group(1)}:{match.group(2)}"
    server.stop()


@pytest.fixture(scope="module")
def channel(gateway: tuple[ServerProcess, str]) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(gateway[1]) as chan:
        yield chan


def test_all_three_methods_with_a_key(channel: grpc.Channel, category_count: int) -> None:
    stub = gpb_grpc.ClassifierGatewayStub(channel)
    answer, call = stub.Classify.with_call(
        gpb.ClassifyTextRequest(text="What is the boiling point of water in kelvin?", with_probabilities=True), metadata=KEY, timeout=60
    )
    assert answer.result.category == "science" and 0 < answer.result.confidence <= 1
    assert len(answer.result.probabilities) == category_count and answer.result.entropy >= 0
    assert dict(call.initial_metadata())["x-trace-id"] == answer.trace_id and len(answer.trace_id) == 32

    batch = stub.ClassifyBatch(
        pb.ClassifyRequest(texts=["integrate x squared", "", "who won the battle of hastings"]), metadata=KEY, timeout=60
    )
    assert (batch.classified, batch.failed) == (2, 1)
    assert [item.WhichOneof("outcome") for item in batch.results] == ["result", "error", "result"]
    assert batch.results[0].result.category == "math" and batch.results[2].result.category == "history"
    assert "empty" in batch.results[1].error

    listed = stub.ListCategories(gpb.ListCategoriesRequest(), metadata=KEY, timeout=30)
    assert [c.name for c in listed.categories] == ["math", "science", "technology", "history", "general"]
    assert all(c.system_prompt and c.description for c in listed.categories)


def test_without_a_key_or_with_a_wrong_one_every_method_is_unauthenticated(channel: grpc.Channel) -> None:
    stub = gpb_grpc.ClassifierGatewayStub(channel)
    calls = [
        lambda md: stub.Classify(gpb.ClassifyTextRequest(text="hello"), metadata=md, timeout=10),
        lambda md: stub.ClassifyBatch(pb.ClassifyRequest(texts=["hello"]), metadata=md, timeout=10),
        lambda md: stub.ListCategories(gpb.ListCategoriesRequest(), metadata=md, timeout=10),
    ]
    for call in calls:
        for metadata in ((), (("authorization", "Bearer wrong-key"),)):
            with pytest.raises(grpc.RpcError) as refused:
                call(metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_bad_text_is_invalid_argument_with_an_event_id(channel: grpc.Channel) -> None:
    stub = gpb_grpc.ClassifierGatewayStub(channel)
    with pytest.raises(grpc.RpcError) as failed:
        stub.Classify(gpb.ClassifyTextRequest(text="   "), metadata=KEY, timeout=10)
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "empty" in failed.value.details()
    assert len(dict(failed.value.trailing_metadata())["x-event-id"]) == 32


def test_health_answers_serving_without_a_key(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "mcp_classifier.api.v1.ClassifierGateway"):
        assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_public_service(channel: grpc.Channel) -> None:
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    (answer,) = list(reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
    names = {s.name for s in answer.list_services_response.service}
    assert {"mcp_classifier.api.v1.ClassifierGateway", "grpc.health.v1.Health"} <= names
