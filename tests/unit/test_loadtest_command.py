"""The Locust command line and environment the runner builds, and when a run counts as a success.

--compare narrows the workload to REST without batch calls; users and length come from the locustfile's
step shape (a constant run is one step), never from Locust's -u/-t, so the warm-up is outside every step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_classifier.loadtest.runner import LoadtestOptions, locust_command, locust_env
from mcp_classifier.loadtest.verdict import verdict


def options(**changes: object) -> LoadtestOptions:
    base: dict[str, Any] = dict(url="http://x", backend="local", users=4, spawn_rate=4.0, duration_s=10, hit_ratio=0.5,
                                probabilities_ratio=0.5, length_mix="short:1", api_key=None, out=Path("out"), compare=None,
                                shape="constant", processes=1)  # fmt: skip
    base.update(changes)
    return LoadtestOptions(**base)


def test_compare_runs_rest_users_only_and_excludes_batch_after_the_class_names() -> None:
    command = locust_command(options(compare="http://peer"), "http://x", Path("out"), ["RestUser"])
    # --exclude-tags takes every word after it, so the user class must come before it
    assert command[-3:] == ["RestUser", "--exclude-tags", "batch"]


def test_a_plain_run_has_every_user_and_every_tag_and_leaves_users_and_length_to_the_shape() -> None:
    command = locust_command(options(), "http://x", Path("out"), [])
    assert "--exclude-tags" not in command and "RestUser" not in command
    assert "-u" not in command and "-t" not in command
    assert command[command.index("--json-file") + 1] == str(Path("out") / "stats")


def test_a_constant_run_is_one_step_of_its_users_and_a_stepped_run_lists_its_steps() -> None:
    env = locust_env(options(), Path("out"))
    assert (env["MCP_LOADTEST_SHAPE"], env["MCP_LOADTEST_STEPS"], env["MCP_LOADTEST_STEP_S"]) == ("steps", "4", "10")
    assert env["MCP_LOADTEST_SPAWN_RATE"] == "4.0"
    env = locust_env(options(shape="steps", steps=(1, 2, 4), step_duration_s=5), Path("out"))
    assert (env["MCP_LOADTEST_STEPS"], env["MCP_LOADTEST_STEP_S"], env["MCP_LOADTEST_SPAWN_RATE"]) == ("1,2,4", "5", "0")
    assert locust_env(options(shape="stages"), Path("out"))["MCP_LOADTEST_SHAPE"] == "stages"


def _step(requests: int, failures: int) -> dict[str, Any]:
    return {"requests": requests, "failures": failures}


def test_nothing_measured_is_never_a_success() -> None:
    assert verdict({"steps": [], "total": {}}, 0.0) == "no requests were measured: the target answered nothing within the run"
    assert "no requests were measured" in (verdict({"steps": [_step(0, 0), _step(0, 0)]}, 0.0) or "")


def test_a_failed_warm_up_is_named_before_anything_else() -> None:
    reason = verdict({"warm_up": {"failed": "the cache warm-up did not finish within 5 s (3 of 100 requests done)"}, "steps": []}, 0.0)
    assert reason and reason.startswith("the cache warm-up did not finish within 5 s") and "--warmup-timeout" in reason


def test_failures_count_against_the_allowed_ratio() -> None:
    assert verdict({"steps": [_step(100, 0)]}, 0.0) is None
    assert "1 of 100 measured requests failed (1.0%), above --max-failure-ratio 0" == verdict({"steps": [_step(100, 1)]}, 0.0)
    assert verdict({"steps": [_step(50, 1), _step(50, 0)]}, 0.02) is None
    assert verdict({"total": {"num_requests": 10, "num_failures": 0}}, 0.0) is None  # the stages shape: the whole run
