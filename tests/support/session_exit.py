"""Make a test session end, whatever a failed test left behind.

Why: a test that timed out once left its embedded Ray node (GCS, raylet) and a non-daemon thread
running, and pytest printed its summary and then never exited, so CI ran into its wall-clock limit
instead of failing fast. The hooks in tests/conftest.py call these after every fixture is torn down.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time

import psutil

from mcp_classifier.embedder.local_cluster import end_processes

CHILD_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL: Ray's processes exit within a second of SIGTERM
EXIT_GRACE_S = 60.0  # how long the interpreter may take to exit after the last hook before it is made to
# Python's own helper, started by multiprocessing (torch, Ray's client) for the interpreter's lifetime: it exits when
# the interpreter does, and the interpreter still talks to it while exiting, so it is not a leftover.
PYTHONS_OWN_HELPERS = ("multiprocessing.resource_tracker",)


def end_descendants(root: psutil.Process, grace_s: float = CHILD_GRACE_S) -> list[str]:
    """End every process below ``root`` but Python's own helpers; say which."""
    try:
        leftovers = [proc for proc in root.children(recursive=True) if not _pythons_own_helper(proc)]
    except psutil.Error:
        return []
    described = [_describe(proc) for proc in leftovers]
    end_processes(leftovers, grace_s)
    return described


def exit_if_still_running(after_s: float, status: int) -> None:
    """Start a daemon watchdog: if the interpreter has not exited ``after_s`` from now, print every
    thread's stack (what holds the exit) and leave with ``status``, the session's own result.

    A daemon thread never delays a clean exit; it only acts when something else does.
    """

    def watch() -> None:
        time.sleep(after_s)
        sys.stderr.write(f"\n[tests] the interpreter is still running {after_s:.0f} s after the session ended; its threads:\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.write(f"[tests] exiting with the session's status {status}\n")
        sys.stderr.flush()
        os._exit(status)

    threading.Thread(target=watch, name="session-exit-watchdog", daemon=True).start()


def _pythons_own_helper(proc: psutil.Process) -> bool:
    try:
        command = " ".join(proc.cmdline())
    except psutil.Error:
        return False
    return any(helper in command for helper in PYTHONS_OWN_HELPERS)


def _describe(proc: psutil.Process) -> str:
    try:
        return f"{proc.pid} {' '.join(proc.cmdline())[:120] or proc.name()}"
    except psutil.Error:
        return str(proc.pid)
