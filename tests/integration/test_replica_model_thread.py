"""A Ray Serve replica runs every model call, its load and warm-up included, on its one forward thread.

Why it matters: OpenMP keeps a thread team per calling thread. When the model was loaded and warmed
on the actor's thread and then served from the forward thread, every forward of a replica with two
or more torch threads ran about twice as slow (a lone MiniLM text 10.8 against 5.4 ms), which hit
any replica given more than one CPU. The replica class runs here in-process on a real MiniLM, without
a Ray cluster: the thread placement is the replica's own code.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import ray
import torch

from mcp_classifier.api.v1 import classifier_pb2 as pb
from mcp_classifier.embedder.deployment import Embedder
from mcp_classifier.embedder.serve_config import replica_settings
from mcp_classifier.settings import Settings


@pytest.fixture
def model_call_threads() -> Iterator[set[str]]:
    """The names of the threads that called any torch module while the fixture was active."""
    names: set[str] = set()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: names.add(threading.current_thread().name))
    try:
        yield names
    finally:
        handle.remove()


def test_load_warm_up_and_embed_run_on_the_thread_that_serves_batches(model_call_threads: set[str]) -> None:
    """Classify's batches run on the same executor (through @serve.batch, which needs a live Serve replica to call)."""
    replica = Embedder.func_or_class(replica_settings(Settings()))
    assert not ray.is_initialized(), "built in process, the replica must not start a Ray instance of its own"
    assert model_call_threads, "loading and warming the model should have run it"
    assert all(name.startswith("forward") for name in model_call_threads), model_call_threads
    loaded_on = set(model_call_threads)

    model_call_threads.clear()
    embedded = asyncio.run(replica.Embed(pb.EmbedRequest(texts=["a tool that books flights"], kind=pb.EmbedRequest.DOCUMENT)))
    assert embedded.dimensions == 384
    assert model_call_threads == loaded_on, (model_call_threads, loaded_on)
    # the executor that Classify's batches use is that one thread
    assert replica._executor.submit(lambda: threading.current_thread().name).result() in loaded_on
