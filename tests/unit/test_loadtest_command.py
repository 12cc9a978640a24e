"""The Locust command line the runner builds: --compare narrows the workload to REST without batch calls."""

from __future__ import annotations

from pathlib import Path

from mcp_classifier.loadtest.runner import LoadtestOptions, locust_command


def options(**changes: object) -> LoadtestOptions:
    base = dict(url="http://x", backend="local", users=4, spawn_rate=4.0, duration_s=10, hit_ratio=0.5, probabilities_ratio=0.5,
                length_mix="short:1", api_key=None, out=Path("out"), compare=None, shape="constant", processes=1)  # fmt: skip
    base.update(changes)
    return LoadtestOptions(**base)


def test_compare_runs_rest_users_only_and_excludes_batch_after_the_class_names() -> None:
    command = locust_command(options(compare="http://peer"), "http://x", Path("out"), ["RestUser"])
    # --exclude-tags takes every word after it, so the user class must come before it
    assert command[-3:] == ["RestUser", "--exclude-tags", "batch"]


def test_a_plain_run_has_every_user_and_every_tag() -> None:
    command = locust_command(options(), "http://x", Path("out"), [])
    assert "--exclude-tags" not in command and "RestUser" not in command
    assert command[command.index("-u") + 1] == "4" and command[command.index("-t") + 1] == "10s"
    assert command[command.index("--json-file") + 1] == str(Path("out") / "stats")
