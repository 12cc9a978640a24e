"""Fixtures shared by every tier: the offline environment, the peer's data, the category count, one real gateway.

Tiers: tests/unit (in-process, fake backend, no model; seven tests start a short Python child), tests/integration
(real Redis, the real model, real gRPC, in-process or a real tool binary), tests/e2e (real processes: uvicorn,
embedded Ray, the CLI, the real MCP clients). Helpers live in tests/support.

Under CI=true a skip fails the test, naming its reason, unless the test is marked `cuda` (CI's hosts have none).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import psutil
import pytest

from mcp_classifier.settings import settings_fields
from mcp_classifier.util.omp import apply_omp_wait_policy
from tests.support import API_KEY_IN_FILE, PEER_DIR
from tests.support.processes import ServerProcess, start_server
from tests.support.session_exit import EXIT_GRACE_S, end_descendants, exit_if_still_running

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# The tests' in-process model work waits for its threads as the product does (the CLI sets it for its processes).
apply_omp_wait_policy(settings_fields()["omp_wait_policy"].default, settings_fields()["omp_spin_count"].default)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real gateway (uvicorn, in-process backend, builtin:minilm) for the whole session."""
    proc = start_server(tmp_path_factory.mktemp("server"))
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def peer_dir() -> Path:
    if not PEER_DIR.is_dir():
        pytest.skip(f"peer data not found at {PEER_DIR} (../shared is absent)")
    return PEER_DIR


@pytest.fixture(scope="session")
def category_count() -> int:
    from mcp_classifier.classify.categories import load_categories

    return len(load_categories().categories)


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An API keys file as a mounted Kubernetes Secret holds it (one per module: tests may rotate it)."""
    path = tmp_path_factory.mktemp("keys") / "api-keys"
    path.write_text(f"# mounted from a Kubernetes Secret\n\n{API_KEY_IN_FILE}\n")
    return path


# ---- under CI=true a skip is a failure, unless the test is marked as one CI's hosts cannot run ------------------
EXPECTED_SKIP_MARKER = "cuda"  # CI's hosts have no CUDA device: these tests are the only ones meant to skip there


def skips_fail() -> bool:
    """CI sets CI=true (.ci/run too): a run there that skipped a redis, npm or ../shared test would pass with that
    area untested, so there a skip fails the run."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skip report carries: (path, line, "Skipped: why") for pytest.skip and skipif alike."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def unexpected_skip(reason: str) -> pytest.ExceptionInfo[BaseException]:
    """A pytest.fail naming the skip's reason: its report reads as any failure, in -ra's summary line too."""
    try:
        pytest.fail(f"skipped under CI=true, where only tests marked {EXPECTED_SKIP_MARKER} may skip: {reason}", pytrace=False)
    except pytest.fail.Exception:
        return pytest.ExceptionInfo.from_current()
    raise AssertionError("pytest.fail returned")  # pragma: no cover


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI=true, a skip (a skipif, a pytest.skip in the test or a fixture) of an unmarked test fails it."""
    report: pytest.TestReport = yield
    if not (report.skipped and skips_fail()) or hasattr(report, "wasxfail") or item.get_closest_marker(EXPECTED_SKIP_MARKER):
        return report
    call.excinfo = unexpected_skip(skip_reason(report))
    return pytest.TestReport.from_item_and_call(item, call)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """The same for a whole module skipped while it is collected (pytest.importorskip, allow_module_level)."""
    report: pytest.CollectReport = yield
    if report.skipped and skips_fail():
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where only tests marked {EXPECTED_SKIP_MARKER} may skip: {skip_reason(report)}"
    return report


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After every fixture's teardown: end the processes a failed test left (an embedded Ray node), and make
    sure a thread one left cannot keep the run (and CI) from ending. Runs in each pytest-xdist worker too."""
    if session.config.pluginmanager.has_plugin("dsession"):
        return  # the pytest-xdist controller: its children are the workers, and each worker ends its own leftovers
    leftovers = end_descendants(psutil.Process())
    if leftovers:
        print(f"\n[tests] ended {len(leftovers)} process(es) left running after the session:", *leftovers, sep="\n  ")
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker idles until the controller ends it: the controller's watchdog covers both
    exit_if_still_running(EXIT_GRACE_S, int(exitstatus))
