"""What the console shows: readable lines on a terminal, JSON lines elsewhere or when asked, and the one-shot
commands quiet (warnings only) unless --verbose or a log level is set."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_classifier import cli
from mcp_classifier.settings import ENV_PREFIX
from mcp_classifier.telemetry import PROGRESS_BARS_ENV, configure_logging, resolve_log_format

ONE_SHOT = ["classify", "eval", "doctor", "eval-tools", "serve-config"]
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO mcp_classifier\.test: model loaded$")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def root_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """configure_logging replaces the root handlers and may set the progress-bar variable: both are put back."""
    monkeypatch.delenv(PROGRESS_BARS_ENV, raising=False)
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


@pytest.fixture
def logging_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """main()'s configure_logging calls, recorded instead of made; no level comes from the environment."""
    monkeypatch.delenv(f"{ENV_PREFIX}LOG_LEVEL", raising=False)
    monkeypatch.delenv(f"{ENV_PREFIX}VERBOSE", raising=False)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: calls.append((args, kwargs)))
    return calls


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert resolve_log_format("auto", Terminal()) == "text"
    assert resolve_log_format("auto", io.StringIO()) == "json"
    assert resolve_log_format("json", Terminal()) == "json"
    assert resolve_log_format("text", io.StringIO()) == "text"


@pytest.mark.usefixtures("root_logging")
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_each_format_writes_its_own_kind_of_line(log_format: str, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", log_format)
    logging.getLogger("mcp_classifier.test").info("model loaded")
    (line,) = capsys.readouterr().err.splitlines()
    if log_format == "json":
        record = json.loads(line)
        assert (record["level"], record["logger"], record["message"]) == ("INFO", "mcp_classifier.test", "model loaded")
    else:
        assert TEXT_LINE.match(line), line


@pytest.mark.usefixtures("root_logging")
def test_progress_bars_are_off_unless_asked_and_a_users_own_choice_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_logging("info", "json", progress_bars=True)
    assert PROGRESS_BARS_ENV not in os.environ
    configure_logging("info", "json")
    assert os.environ[PROGRESS_BARS_ENV] == "1"
    monkeypatch.setenv(PROGRESS_BARS_ENV, "0")
    configure_logging("info", "json")
    assert os.environ[PROGRESS_BARS_ENV] == "0"


@pytest.mark.parametrize("command", ONE_SHOT)
def test_one_shot_commands_log_warnings_only_unless_verbose_or_a_level_is_set(
    command: str, monkeypatch: pytest.MonkeyPatch, logging_calls: list[tuple[tuple[Any, ...], dict[str, Any]]]
) -> None:
    extra = {"classify": ["text"], "eval": ["--data", "x.jsonl"], "eval-tools": ["queries.jsonl"]}.get(command, [])

    def level(*flags: str) -> str:
        args = cli.build_parser().parse_args([command, *extra, *flags])
        return cli.console_log_level(command, cli.settings_from_args(args))

    assert level() == "warning"
    assert level("--verbose") == "info"
    assert level("--log-level", "debug") == "debug"
    assert level("--log-level", "info") == "info"  # the default's value, given: kept
    monkeypatch.setenv(f"{ENV_PREFIX}LOG_LEVEL", "error")
    assert level() == "error"


@pytest.mark.parametrize("command", ["serve", "stdio"])
def test_the_servers_log_at_their_level(command: str, logging_calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> None:
    settings = cli.settings_from_args(cli.build_parser().parse_args([command]))
    assert cli.console_log_level(command, settings) == "info"


def test_main_hands_the_level_format_and_progress_bars_to_the_log_setup(
    logging_calls: list[tuple[tuple[Any, ...], dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve-config"]) == 0
    assert cli.main(["serve-config", "--verbose", "--log-format", "json"]) == 0
    assert cli.main(["serve-config", "--log-level", "debug", "--log-format", "text"]) == 0
    assert logging_calls == [
        (("warning", "auto"), {"progress_bars": False}),
        (("info", "json"), {"progress_bars": True}),
        (("debug", "text"), {"progress_bars": False}),
    ]
    assert capsys.readouterr().out.startswith("proxy_location")
