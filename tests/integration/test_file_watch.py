"""The categories file watch survives Kubernetes ConfigMap updates, not just the first one."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

from mcp_classifier.util.file_watch import watch_file_in_thread


def _configmap_update(folder: Path, version: int) -> None:
    """What the kubelet does: a new timestamped folder, an atomic `..data` swap, the old folder deleted."""
    new = folder / f"..v{version}"
    new.mkdir()
    (new / "categories.yaml").write_text(f"version: {version}\n")
    tmp = folder / "..data_tmp"
    tmp.symlink_to(new.name)
    old = os.readlink(folder / "..data") if (folder / "..data").is_symlink() else None
    os.replace(tmp, folder / "..data")
    if old:
        shutil.rmtree(folder / old)


def _wait_for(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_every_configmap_update_is_seen(tmp_path: Path) -> None:
    _configmap_update(tmp_path, 1)
    path = tmp_path / "categories.yaml"
    path.symlink_to("..data/categories.yaml")
    seen: list[str] = []
    stop = threading.Event()
    watch_file_in_thread(path, lambda: seen.append(path.read_text()), stop)
    time.sleep(0.5)  # let the watch start
    try:
        for version in (2, 3, 4):
            _configmap_update(tmp_path, version)
            assert _wait_for(lambda v=version: f"version: {v}\n" in seen), f"update {version} was missed; saw {seen}"
    finally:
        stop.set()
