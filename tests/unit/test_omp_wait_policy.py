"""omp_wait_policy: the CLI's own processes, the ones it starts, and the Ray replicas all get the chosen policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from mcp_classifier.cli import main
from mcp_classifier.embedder.serve_config import serve_config
from mcp_classifier.settings import Settings
from mcp_classifier.util.omp import MKL_FAST_MM_ENV, OMP_SPIN_COUNT_ENV, OMP_WAIT_POLICY_ENV


def replica_env(settings: Settings) -> dict[str, str]:
    (app,) = serve_config(settings)["applications"]
    env: dict[str, str] = app["runtime_env"]["env_vars"]
    return env


def test_the_replicas_wait_passively_after_a_bounded_spin_unless_told_otherwise() -> None:
    mkl = {MKL_FAST_MM_ENV: "1"}  # MKL's buffers given back, whatever the wait
    assert replica_env(Settings()) == {OMP_WAIT_POLICY_ENV: "PASSIVE", OMP_SPIN_COUNT_ENV: "30000", **mkl}
    assert replica_env(Settings(omp_spin_count=0)) == {OMP_WAIT_POLICY_ENV: "PASSIVE", OMP_SPIN_COUNT_ENV: "0", **mkl}
    assert replica_env(Settings(omp_wait_policy="active")) == {OMP_WAIT_POLICY_ENV: "ACTIVE", **mkl}  # an active wait is unbounded


@pytest.mark.parametrize(
    ("flags", "env_setting", "expected"),
    [([], None, "PASSIVE"), (["--omp-wait-policy", "active"], None, "ACTIVE"), ([], "active", "ACTIVE")],
)
def test_the_cli_sets_the_policy_for_every_process_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], env_setting: str | None, expected: str
) -> None:
    monkeypatch.setenv(OMP_WAIT_POLICY_ENV, "left-by-someone-else")  # restored after the test
    monkeypatch.setenv(OMP_SPIN_COUNT_ENV, "left-by-someone-else")
    if env_setting is not None:
        monkeypatch.setenv("MCP_CLASSIFIER_OMP_WAIT_POLICY", env_setting)
    assert main(["serve-config", *flags]) == 0
    spin = {OMP_SPIN_COUNT_ENV: "30000"} if expected == "PASSIVE" else {}
    assert os.environ[OMP_WAIT_POLICY_ENV] == expected and os.environ.get(OMP_SPIN_COUNT_ENV) == spin.get(OMP_SPIN_COUNT_ENV)
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["applications"][0]["runtime_env"]["env_vars"] == {OMP_WAIT_POLICY_ENV: expected, **spin, MKL_FAST_MM_ENV: "1"}
    assert os.environ[MKL_FAST_MM_ENV] == "1"


def test_an_unknown_policy_is_refused_with_the_choices() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "serve-config", "--omp-wait-policy", "spin"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "passive" in done.stderr and "active" in done.stderr
