"""The suite ends even when a failed test leaves processes or a thread behind (tests/support/session_exit.py).

Real processes: a shell with children and grandchildren, and Python interpreters whose exit is held.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from tests.support import REPO_ROOT
from tests.support.session_exit import end_descendants

# An interpreter as pytest leaves it: the watchdog armed by the last hook, maybe a thread that never ends.
INTERPRETER = """
import sys, threading
sys.path.insert(0, {root!r})
from tests.support.session_exit import exit_if_still_running
exit_if_still_running(after_s={after_s}, status=3)
if {hold}:
    threading.Thread(target=threading.Event().wait).start()  # never ends, and not a daemon: it holds the exit
sys.exit({own_status})
"""


def _run_python(after_s: float, hold: bool, own_status: int = 0) -> tuple[subprocess.CompletedProcess[str], float]:
    code = INTERPRETER.format(root=str(REPO_ROOT), after_s=after_s, hold=hold, own_status=own_status)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_every_process_below_the_root_is_ended_grandchildren_and_ones_that_ignore_sigterm_included() -> None:
    shell = subprocess.Popen(["bash", "-c", "sleep 300 & (trap '' TERM; sleep 300; true) & bash -c 'sleep 300; true' & wait"])
    try:
        root = psutil.Process(shell.pid)
        deadline = time.monotonic() + 10
        while len(root.children(recursive=True)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = root.children(recursive=True)
        assert len(below) == 5, "the shell did not start its children"

        ended = end_descendants(root, grace_s=1.0)

        assert len(ended) == len(below)
        assert not [proc for proc in below if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE]
    finally:
        shell.kill()
        shell.wait()


def test_pythons_own_resource_tracker_is_left_to_exit_with_the_interpreter() -> None:
    # a stand-in whose command line names the helper, as multiprocessing's tracker's does
    helper = f"{sys.executable} -c 'import time; time.sleep(300)' multiprocessing.resource_tracker"
    shell = subprocess.Popen(["bash", "-c", f"sleep 300 & {helper} & wait"])
    try:
        root = psutil.Process(shell.pid)
        deadline = time.monotonic() + 10
        while len(root.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        below = root.children()
        assert len(below) == 2, "the shell did not start its children"

        ended = end_descendants(root, grace_s=1.0)

        assert len(ended) == 1 and "sleep 300" in ended[0]
        survivors = [proc for proc in below if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE]
        assert len(survivors) == 1 and "multiprocessing.resource_tracker" in " ".join(survivors[0].cmdline())
    finally:
        for proc in root.children(recursive=True):
            proc.kill()
        shell.kill()
        shell.wait()


def test_an_interpreter_held_open_by_a_thread_exits_with_the_sessions_status_and_shows_the_threads_stack() -> None:
    done, took_s = _run_python(after_s=1.0, hold=True, own_status=0)

    assert done.returncode == 3
    assert took_s < 30
    assert "still running 1 s after the session ended" in done.stderr
    assert "in wait" in done.stderr  # the stuck thread's stack: threading.Event.wait


def test_the_watchdog_neither_delays_nor_changes_a_clean_exit() -> None:
    for own_status in (0, 1):
        done, took_s = _run_python(after_s=30.0, hold=False, own_status=own_status)
        assert done.returncode == own_status
        assert took_s < 20
        assert "still running" not in done.stderr
