"""`serve --workers N`: how many gateway processes `workers 0` means, and the flags that set it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import Settings
from mcp_classifier.util.cpus import cgroup_cpu_limit, resolve_workers, usable_cpus


def _limit(tmp_path: Path, v2: str | None = None, v1: tuple[str, str] | None = None) -> float | None:
    cpu_max, quota, period = tmp_path / "cpu.max", tmp_path / "quota", tmp_path / "period"
    if v2 is not None:
        cpu_max.write_text(v2)
    if v1 is not None:
        quota.write_text(v1[0])
        period.write_text(v1[1])
    return cgroup_cpu_limit(cpu_max, quota, period)


def test_a_cgroup_quota_reads_as_cpus_and_no_quota_as_none(tmp_path: Path) -> None:
    cases = [
        ({"v2": "150000 100000\n"}, 1.5),
        ({"v2": "max 100000\n"}, None),
        ({"v1": ("200000", "100000")}, 2.0),
        ({"v1": ("-1", "100000")}, None),
    ]
    for number, (files, cpus) in enumerate(cases):
        folder = tmp_path / str(number)
        folder.mkdir()
        assert _limit(folder, **files) == cpus, files


def test_no_cgroup_files_means_no_quota(tmp_path: Path) -> None:
    assert _limit(tmp_path) is None


def test_workers_0_is_one_per_usable_cpu_within_the_cap() -> None:
    assert resolve_workers(0, cap=8, cpus=2) == 2
    assert resolve_workers(0, cap=8, cpus=32) == 8
    assert resolve_workers(0, cap=8, cpus=1) == 1
    assert resolve_workers(3, cap=2, cpus=1) == 3, "an explicit count is taken as given"
    assert 1 <= resolve_workers(0, cap=64) == min(64, usable_cpus())


def test_the_default_is_one_process_and_the_flags_set_it() -> None:
    assert Settings().serving.workers == 1
    settings = settings_from_args(build_parser().parse_args(["serve", "--workers", "0", "--max-workers", "4"]))
    assert (settings.serving.workers, settings.serving.max_workers) == (0, 4)
    with pytest.raises(ValidationError):
        Settings(workers=-1)
    with pytest.raises(ValidationError):
        Settings(max_workers=0)
