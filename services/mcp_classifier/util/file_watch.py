"""Watch one file for changes (editors' atomic renames and Kubernetes ConfigMap symlink swaps included)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchfiles import watch

log = logging.getLogger(__name__)

DEBOUNCE_MS = 300  # editors and ConfigMap updates touch several paths per change: act once


def watch_file_in_thread(path: Path, on_change: Callable[[], None], stop: threading.Event) -> threading.Thread:
    """Call on_change (on a daemon thread) whenever anything in the file's folder changes.

    The folder is watched, not the file: a ConfigMap update swaps a `..data` symlink and an
    editor may replace the file, and both would end a watch held on the old inode. on_change
    re-reads the file and decides by content whether anything changed.
    """

    def run() -> None:
        # Not resolved: a ConfigMap's file resolves into a timestamped folder that the kubelet
        # deletes on the next update, while the `..data` swap happens beside the unresolved path.
        folder = path.parent
        try:
            for _ in watch(folder, stop_event=stop, debounce=DEBOUNCE_MS, recursive=False, raise_interrupt=False):
                try:
                    on_change()
                except Exception:
                    log.exception("re-reading %s after a change failed", path)
        except FileNotFoundError:
            log.error("cannot watch %s: its folder does not exist", folder)

    thread = threading.Thread(target=run, name=f"watch:{path.name}", daemon=True)
    thread.start()
    return thread
