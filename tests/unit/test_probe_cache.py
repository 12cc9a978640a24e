"""The probe cache: what a start reads back is what an earlier one wrote, and a bad folder or file only costs the probes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from mcp_classifier.engine.probe_cache import MAX_PROBE_FILES, ProbeCache, ProbeResults, device_identity
from mcp_classifier.util.omp import OMP_SPIN_COUNT_ENV, OMP_WAIT_POLICY_ENV

RESULTS = ProbeResults(packing_agrees=True, speed_ups={"fp16 weights": 37, "fused norms": 0})


def test_a_later_start_reads_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    ProbeCache(tmp_path, "a" * 64).store(RESULTS)
    assert ProbeCache(tmp_path, "a" * 64).load() == RESULTS
    assert ProbeCache(tmp_path, "b" * 64).load() is None  # another model, device or option: its own probes


def test_a_torn_file_is_a_miss_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = ProbeCache(tmp_path, "c" * 64)
    cache.path.write_text('{"packing_agrees": tr')
    with caplog.at_level(logging.WARNING):
        assert cache.load() is None
    assert "probe cache: ignoring" in caplog.text


def test_a_folder_that_cannot_be_written_costs_only_the_probes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    cache = ProbeCache(blocked, "d" * 64)
    with caplog.at_level(logging.WARNING):
        cache.store(RESULTS)
    assert "probe cache off: cannot write" in caplog.text
    assert cache.load() is None


def test_the_folder_keeps_the_most_recently_written_entries(tmp_path: Path) -> None:
    for index in range(MAX_PROBE_FILES + 3):
        cache = ProbeCache(tmp_path, f"{index:032d}")
        cache.store(RESULTS)
        os.utime(cache.path, ns=(index * 10**9, index * 10**9))
    kept = sorted(tmp_path.glob("probes-*.json"))
    assert len(kept) == MAX_PROBE_FILES
    assert ProbeCache(tmp_path, f"{MAX_PROBE_FILES + 2:032d}").load() == RESULTS
    assert not list(tmp_path.glob(".tmp-*"))


def test_the_cpu_identity_names_the_processor_the_threads_and_how_they_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv(OMP_WAIT_POLICY_ENV, "PASSIVE")
    monkeypatch.delenv(OMP_SPIN_COUNT_ENV, raising=False)
    identity = device_identity(torch.device("cpu"))
    assert identity.startswith("cpu:") and identity.endswith(f"threads={torch.get_num_threads()}:wait=passive")
    monkeypatch.setenv(OMP_SPIN_COUNT_ENV, "30000")
    spinning = device_identity(torch.device("cpu"))
    assert spinning.endswith("wait=passive+spin30000")  # a bounded spin moves a forward's cost as the policy does
    monkeypatch.setenv(OMP_WAIT_POLICY_ENV, "ACTIVE")
    assert device_identity(torch.device("cpu")) not in (identity, spinning)  # probes measured under one wait are not reused under another
