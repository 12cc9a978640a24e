"""The categories file watch survives Kubernetes ConfigMap updates, not just the first one, sees editors'
atomic saves, and ignores the other files in the folder (a server's own log written beside the file)."""

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


def _watching(path: Path) -> tuple[list[str], threading.Event]:
    seen: list[str] = []
    stop = threading.Event()
    watch_file_in_thread(path, lambda: seen.append(path.read_text()), stop)
    time.sleep(0.5)  # let the watch start
    return seen, stop


def test_other_files_in_the_folder_do_not_wake_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    path.write_text("version: 1\n")
    seen, stop = _watching(path)
    try:
        log = tmp_path / "serve.log"
        with log.open("a") as out:
            for i in range(20):  # a log written beside the file, line by line, as `serve > ./serve.log` does
                out.write(f"line {i}\n")
                out.flush()
                time.sleep(0.05)
        (tmp_path / "notes.txt").touch()
        os.utime(tmp_path / "notes.txt")
        time.sleep(1.0)  # past the debounce: any event let through has been acted on by now
        assert seen == [], f"writes to other files woke the watch {len(seen)} time(s)"
        path.write_text("version: 2\n")  # the watch is alive: the file's own change still arrives
        assert _wait_for(lambda: "version: 2\n" in seen), f"the file's own change was missed; saw {seen}"
    finally:
        stop.set()


def test_an_editors_atomic_save_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    path.write_text("version: 1\n")
    seen, stop = _watching(path)
    try:
        temporary = tmp_path / ".categories.yaml.tmp"  # written beside, then renamed over the file
        temporary.write_text("version: 2\n")
        os.replace(temporary, path)
        assert _wait_for(lambda: "version: 2\n" in seen), f"the rename over the file was missed; saw {seen}"
    finally:
        stop.set()
