"""Watch one file for changes (editors' atomic renames and Kubernetes ConfigMap symlink swaps included)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from watchfiles import Change, watch

log = logging.getLogger(__name__)

DEBOUNCE_MS = 300  # editors and ConfigMap updates touch several paths per change: act once


def concerns_file(path: Path) -> Callable[[Change, str], bool]:
    """A watchfiles filter passing only events that can change what ``path`` reads.

    The file's own name (written in place, or renamed over by an editor), and the kubelet's `..`
    entries: a ConfigMap update writes a `..<timestamp>` folder and swaps the `..data` symlink the
    file points through. Anything else in the folder (a log written beside the file, an unrelated
    file touched) is not the file, and would otherwise wake a reload on every write.
    """
    name = path.name

    def passes(_change: Change, changed: str) -> bool:
        changed_name = Path(changed).name
        return changed_name == name or changed_name.startswith("..")

    return passes


def watch_file_in_thread(path: Path, on_change: Callable[[], None], stop: threading.Event) -> threading.Thread:
    """Call on_change (on a daemon thread) whenever the file, or the ConfigMap link it reads through, changes.

    The folder is watched, not the file: a ConfigMap update swaps a `..data` symlink and an
    editor may replace the file, and both would end a watch held on the old inode. Events on
    other names in the folder are dropped (``concerns_file``). on_change re-reads the file and
    decides by content whether anything changed.
    """

    def run() -> None:
        # Not resolved: a ConfigMap's file resolves into a timestamped folder that the kubelet
        # deletes on the next update, while the `..data` swap happens beside the unresolved path.
        folder = path.parent
        try:
            for _ in watch(
                folder,
                watch_filter=concerns_file(path),
                stop_event=stop,
                debounce=DEBOUNCE_MS,
                recursive=False,
                raise_interrupt=False,
            ):
                try:
                    on_change()
                except Exception:
                    log.exception("re-reading %s after a change failed", path)
        except FileNotFoundError:
            log.error("cannot watch %s: its folder does not exist", folder)

    thread = threading.Thread(target=run, name=f"watch:{path.name}", daemon=True)
    thread.start()
    return thread
