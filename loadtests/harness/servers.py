"""Real `serve` processes on free loopback ports, their whole process tree accounted for and ended by pid."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mcp_classifier.cli import _flag_type
from mcp_classifier.loadtest.stack import GatewayProcess, start_gateway
from mcp_classifier.settings import settings_fields

from .cpu import ProcessTree

STARTUP_TIMEOUT_S = 180.0
# Fields the benchmark itself decides: loopback only, and always a free port.
FORCED_FIELDS = {"host", "port"}


class Server:
    """A real `serve` process (mcp_classifier.loadtest.stack) whose descendants are tracked too."""

    def __init__(self, extra_args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.extra_args = list(extra_args)
        self.env = dict(env or {})  # added to this process's environment for the server alone
        self.log_path = Path(tempfile.mkstemp(prefix="bench-server-", suffix=".log")[1])
        self.gateway: GatewayProcess | None = None
        self.tree: ProcessTree | None = None
        self.url = ""

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.gateway is not None
        return self.gateway.process

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> str:
        self.gateway = start_gateway(self.log_path, *self.extra_args, env=self.env, timeout_s=timeout_s)
        self.tree = ProcessTree(self.gateway.process.pid)
        self.tree.scan()
        self.url = self.gateway.url
        return self.url

    def stop(self) -> list[int]:
        """SIGTERM by PID (graceful shutdown), SIGKILL only if it hangs; then end leftover descendants.

        Returns the pids of descendants that outlived the server and had to be ended here.
        """
        if self.gateway is None or self.tree is None:
            return []
        self.tree.scan()
        self.gateway.stop()
        deadline = time.monotonic() + 5.0  # let orphans notice their parent is gone
        while (leftovers := self.tree.survivors()) and time.monotonic() < deadline:
            time.sleep(0.2)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.tree.survivors():
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5.0
            while self.tree.survivors() and time.monotonic() < deadline:
                time.sleep(0.2)
        return leftovers


def server_args_from(args: argparse.Namespace) -> list[str]:
    """Turn the settings flags given to a script back into `serve` flags (host/port are ours)."""
    out: list[str] = []
    for name in settings_fields():
        if name in FORCED_FIELDS or not hasattr(args, name):
            continue
        value = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            out += [flag, str(value)]
    return out


def add_serve_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Every `serve` settings flag except host/port (always 127.0.0.1 and a free port here).

    Mirrors mcp_classifier.cli.add_settings_flags so the flags and their parsing stay identical;
    values apply to both the server and the raw floor so the two are comparable.
    """
    group = parser.add_argument_group("server settings (also MCP_CLASSIFIER_<NAME> env vars; host/port are fixed)")
    for name, info in settings_fields().items():
        if name in FORCED_FIELDS:
            continue
        group.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=argparse.SUPPRESS,
            help=f"{info.description} [default: {info.default}]",
            **_flag_type(info.annotation),
        )
