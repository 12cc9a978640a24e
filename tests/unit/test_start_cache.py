"""The start cache's rules, on a stand-in encoder that counts what it embeds (no model).

What a user relies on: a second start embeds nothing, an edited file re-embeds only its new texts, a
different model never reads another model's vectors, and a cache that cannot be written or read never
stops a start. The real model's round trip is tests/integration/test_start_cache_model.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mcp_classifier.classify.start_cache import StartCache, content_key
from mcp_classifier.engine.signature import model_signature


class CountingEncoder:
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.embedded: list[str] = []

    @staticmethod
    def _vector(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
        vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
        return vector / np.linalg.norm(vector)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return np.stack([self._vector(t) for t in texts])

    def encode_with_tokens(self, texts: Sequence[str], *, query: bool) -> tuple[np.ndarray, list[Any]]:
        assert not query
        vectors = self.encode_documents(texts)
        return vectors, [torch.from_numpy(np.tile(v, (len(t.split()), 1))) for t, v in zip(texts, vectors)]


def test_a_second_start_embeds_nothing_and_gets_the_same_vectors(tmp_path: Path) -> None:
    texts = ["integrate x squared", "who won at hastings", "integrate x squared"]
    first, second = CountingEncoder(), CountingEncoder()
    vectors, _ = StartCache(tmp_path, "sig").documents(first, texts, with_tokens=False)
    again, _ = StartCache(tmp_path, "sig").documents(second, texts, with_tokens=False)
    assert sorted(first.embedded) == sorted(set(texts)) and second.embedded == []
    np.testing.assert_array_equal(vectors, again)
    assert vectors.shape == (3, 8)


def test_an_edited_file_re_embeds_only_the_texts_that_changed_with_their_token_vectors(tmp_path: Path) -> None:
    StartCache(tmp_path, "sig").documents(CountingEncoder(), ["a b", "c d e"], with_tokens=True)
    encoder = CountingEncoder()
    vectors, tokens = StartCache(tmp_path, "sig").documents(encoder, ["a b", "new text here", "c d e"], with_tokens=True)
    assert encoder.embedded == ["new text here"]
    assert tokens is not None and [t.shape[0] for t in tokens] == [2, 3, 3]
    np.testing.assert_allclose(tokens[1][0].numpy(), vectors[1])


def test_another_model_signature_never_reads_these_vectors(tmp_path: Path) -> None:
    StartCache(tmp_path, "model-a").documents(CountingEncoder(), ["a text"], with_tokens=False)
    encoder = CountingEncoder()
    StartCache(tmp_path, "model-b").documents(encoder, ["a text"], with_tokens=False)
    assert encoder.embedded == ["a text"]


def test_the_signature_follows_the_model_files_and_settings(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"1234")
    base = model_signature(str(tmp_path), ("fp32", "cpu"))
    assert base == model_signature(str(tmp_path), ("fp32", "cpu"))
    assert base != model_signature(str(tmp_path), ("bf16", "cpu"))
    weights.write_bytes(b"12345")  # new weights
    assert base != model_signature(str(tmp_path), ("fp32", "cpu"))
    assert model_signature(str(tmp_path / "absent"), ()) is None


def test_a_fit_is_computed_once_per_key(tmp_path: Path) -> None:
    calls: list[int] = []

    def fit() -> dict[str, int]:
        calls.append(1)
        return {"temperature": 3}

    cache = StartCache(tmp_path, "sig")
    assert cache.fitted(content_key(["a"], [0]), fit) == {"temperature": 3}
    assert StartCache(tmp_path, "sig").fitted(content_key(["a"], [0]), fit) == {"temperature": 3}
    assert len(calls) == 1
    StartCache(tmp_path, "sig").fitted(content_key(["a", "b"], [0, 1]), fit)
    assert len(calls) == 2


def test_a_torn_file_is_a_miss_and_an_unwritable_folder_turns_the_cache_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = StartCache(tmp_path, "sig")
    cache.documents(CountingEncoder(), ["a"], with_tokens=False)
    for stored in tmp_path.glob("documents-*.pkl"):
        stored.write_bytes(b"not a pickle")
    encoder = CountingEncoder()
    StartCache(tmp_path, "sig").documents(encoder, ["a"], with_tokens=False)
    assert encoder.embedded == ["a"] and "ignoring" in caplog.text

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    unwritable = StartCache(blocked / "cache", "sig")  # a folder inside a file cannot be made
    vectors, _ = unwritable.documents(CountingEncoder(), ["b"], with_tokens=False)
    assert vectors.shape == (1, 8) and "start cache off" in caplog.text


def test_the_folder_keeps_the_most_recently_used_entries_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_classifier.classify.start_cache as start_cache

    monkeypatch.setattr(start_cache, "MAX_FILES", 3)
    cache = StartCache(tmp_path, "sig")
    cache.fitted("first", lambda: 1)
    for n in range(2, 5):
        cache.fitted(f"entry {n}", lambda: 0)
        if n == 3:
            assert cache.fitted("first", lambda: 99) == 1  # read again: now among the most recent
    assert len(list(tmp_path.glob("*.pkl"))) == 3
    assert StartCache(tmp_path, "sig").fitted("first", lambda: 99) == 1  # kept: it was used
    assert StartCache(tmp_path, "sig").fitted("entry 2", lambda: 7) == 7  # the least recently used went
