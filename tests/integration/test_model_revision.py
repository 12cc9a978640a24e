"""A hub id pinned to a revision loads that revision's snapshot from the local hub cache, offline, and nothing else.

The cache is built here in the hub's own layout (models--org--name/snapshots/<commit>/..., refs/main) from two tiny
Qwen3 models with different weights: the pinned one and the one refs/main names. The network is closed for the
whole load, as in a cluster without egress to the hub (HF_HUB_OFFLINE=1, the image and volume deliveries).
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.errors import ModelLoadError
from mcp_classifier.engine.options import EngineOptions
from tests.support.tiny_models import build_tiny_qwen3

REPO = "acme/tiny-qwen3-embedding"
PINNED = "1111111111111111111111111111111111111111"
NEWER = "2222222222222222222222222222222222222222"
TEXTS = ["what is the derivative of a polynomial", "hello there how are you"]
OPTIONS = EngineOptions(forward_overhead_tokens=1.0, pack_width=0)


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HF_HOME/hub with two snapshots of REPO: PINNED, and NEWER (other weights) that refs/main points to."""
    from safetensors.torch import load_file, save_file

    home = tmp_path_factory.mktemp("hf-home")
    repo = home / "hub" / f"models--{REPO.replace('/', '--')}"
    pinned = build_tiny_qwen3(repo / "snapshots" / PINNED)
    newer = repo / "snapshots" / NEWER
    shutil.copytree(pinned, newer)
    weights = load_file(newer / "model.safetensors")
    save_file({name: -tensor for name, tensor in weights.items()}, newer / "model.safetensors", metadata={"format": "pt"})
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(NEWER)
    return home


@pytest.fixture
def offline(hub_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HF_HOME at the built cache, HF_HUB_OFFLINE=1, and any connection attempt an error."""
    monkeypatch.setenv("HF_HOME", str(hub_cache))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refuse(self: socket.socket, address: object) -> None:
        raise AssertionError(f"the offline load opened a connection to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield hub_cache / "hub"


def embed(encoder: TextEncoder) -> np.ndarray:
    return np.asarray(encoder.encode(TEXTS))


def test_a_pinned_revision_loads_its_own_snapshot_offline(offline: Path) -> None:
    snapshots = offline / f"models--{REPO.replace('/', '--')}" / "snapshots"
    pinned = TextEncoder.load(REPO, revision=PINNED, device="cpu", options=OPTIONS)
    assert pinned.model_dir == str(snapshots / PINNED) and pinned.revision == PINNED
    from_dir = TextEncoder.load(str(snapshots / PINNED), device="cpu", options=OPTIONS)
    np.testing.assert_allclose(embed(pinned), embed(from_dir), atol=1e-6)
    # unpinned, the cache's refs/main decides: the other snapshot, with other weights
    unpinned = TextEncoder.load(REPO, device="cpu", options=OPTIONS)
    assert unpinned.model_dir == str(snapshots / NEWER)
    assert not np.allclose(embed(unpinned), embed(pinned), atol=1e-3)


def test_a_revision_not_in_the_cache_fails_with_one_clear_line(offline: Path) -> None:
    missing = "3333333333333333333333333333333333333333"
    with pytest.raises(ModelLoadError) as failure:
        TextEncoder.load(REPO, revision=missing, device="cpu", options=OPTIONS)
    message = str(failure.value)
    assert "\n" not in message
    assert REPO in message and f"revision {missing}" in message
    assert f"the local hub cache {offline} only" in message and "HF_HUB_OFFLINE=1" in message
    # a model that is not there at all says the same things
    with pytest.raises(ModelLoadError, match=r"cannot load model 'acme/absent' at revision 1{40}: looked in the local hub cache .* only"):
        TextEncoder.load("acme/absent", revision=PINNED, device="cpu", options=OPTIONS)


def test_a_local_directory_ignores_the_revision(offline: Path) -> None:
    snapshot = offline / f"models--{REPO.replace('/', '--')}" / "snapshots" / PINNED
    encoder = TextEncoder.load(str(snapshot), revision="anything", device="cpu", options=OPTIONS)
    assert encoder.model_dir == str(snapshot) and encoder.revision == ""
