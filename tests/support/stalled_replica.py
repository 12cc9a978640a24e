"""A real gRPC server speaking the embedder's API whose Classify never answers: a hung replica.

Info answers (the replica looks alive to probes), Classify and Embed hold the call until the
client gives up or the test releases them, as a replica whose model thread is stuck would. It
stands in for a Ray replica in a hung state, which cannot be produced on purpose here.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import grpc

from mcp_classifier.api.convert import info_to_proto
from mcp_classifier.api.v1 import classifier_pb2_grpc as pb_grpc
from tests.support.fake_backend import FakeBackend


class _Stalled(pb_grpc.ClassifierServicer):
    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.info = info_to_proto(FakeBackend().classifier_info())
        self.stalled_calls = 0

    def Info(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self.info

    def _hang(self, context: grpc.ServicerContext) -> None:
        self.stalled_calls += 1
        while context.is_active() and not self.release.is_set():
            time.sleep(0.05)
        context.abort(grpc.StatusCode.UNAVAILABLE, "the stalled replica was released")

    def Classify(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._hang(context)

    def Embed(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._hang(context)


class StalledReplica:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.servicer = _Stalled(self.release)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
        pb_grpc.add_ClassifierServicer_to_server(self.servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def start(self) -> StalledReplica:
        self.server.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.stop(grace=None)
