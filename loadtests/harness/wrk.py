"""wrk as the load generator: a C client that costs a few percent of a core where aiohttp took most of one.

wrk itself is driven here (not a library): one thread, N keep-alive connections, a Lua script that
cycles through the benchmark's texts so consecutive requests differ, counts answers whose MCP
result says ``isError`` and prints its summary and latency percentiles as one JSON line. The route and
the body each text becomes are the caller's (classify_text on /mcp/tools/call unless told otherwise), so
one driver loads any JSON route, another server's included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .cpu import ProcessTree, host_busy_seconds
from .loadgen import HttpResult, body_of

WRK_SCRIPT = r"""
local bodies = {}
local next_body = 1
local path = "/mcp/tools/call"
is_error = 0  -- global: done() reads it from each thread with thread:get
local thread_list = {}

function setup(thread)
  table.insert(thread_list, thread)
end

function init(args)
  for line in io.lines(args[1]) do table.insert(bodies, line) end
  if args[2] then path = args[2] end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = bodies[next_body]
  next_body = next_body % #bodies + 1
  return wrk.format(nil, path, nil, body)
end

function response(status, headers, body)
  if status == 200 and string.find(body, '"isError":true', 1, true) then is_error = is_error + 1 end
end

function done(summary, latency, requests)
  local errors = 0
  for _, thread in ipairs(thread_list) do errors = errors + thread:get("is_error") end
  io.write("WRK_JSON " .. string.format(
    '{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"is_error":%d,"p50_us":%d,"p95_us":%d,"p99_us":%d,"mean_us":%f}\n',
    summary.requests, summary.duration, summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout, errors,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
"""


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


CLASSIFY_PATH = "/mcp/tools/call"


class Wrk:
    """One prepared workload (script and request bodies on disk) that can be run at any client count.

    Each text is one request: ``body`` turns it into the JSON body (one line: wrk reads a body a line) POSTed
    to ``path``. An answer other than 2xx is a failure on any route; ``"isError":true`` one on the MCP routes.
    """

    def __init__(self, texts: Sequence[str], *, path: str = CLASSIFY_PATH, body: Callable[[str], bytes] = body_of) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="bench-wrk-"))
        self.script = self._dir / "classify.lua"
        self.script.write_text(WRK_SCRIPT)
        self.bodies = self._dir / "bodies.jsonl"
        self.bodies.write_bytes(b"\n".join(body(t) for t in texts) + b"\n")
        self.path = path

    def run(self, url: str, clients: int, seconds: float, tree: ProcessTree | None = None, timeout_s: float = 30.0) -> HttpResult:
        """Closed loop: each of ``clients`` connections sends its next request when the last is answered."""
        command = [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{max(1, round(seconds))}s",
            f"--timeout={timeout_s:g}s",
            "-s",
            str(self.script),
            url,
            "--",
            str(self.bodies),
            self.path,
        ]
        server0, wrk0, host0 = _cpu(tree)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or "WRK_JSON " not in done.stdout:
            raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
        stats = json.loads(done.stdout.split("WRK_JSON ", 1)[1].splitlines()[0])
        seconds_run = stats["duration_us"] / 1e6
        errors = sum(stats[k] for k in ("connect", "read", "write", "status", "timeout", "is_error"))
        result = HttpResult(
            name=f"wrk {clients} clients",
            clients=clients,
            ok=stats["requests"] - errors,
            failures=errors,
            seconds=seconds_run,
            rps=stats["requests"] / seconds_run,
            p50_ms=stats["p50_us"] / 1000,
            p95_ms=stats["p95_us"] / 1000,
            p99_ms=stats["p99_us"] / 1000,
        )
        server1, wrk1, host1 = _cpu(tree)
        wall = seconds_run + 0.1  # wrk's own start and the script's load: outside its measured window
        result.loadgen_cpu_pct = 100 * (wrk1 - wrk0) / wall
        if server0 is not None and server1 is not None:
            result.server_cpu_pct = 100 * (server1 - server0) / wall
            if host0 is not None and host1 is not None:
                result.other_cpu_pct = max(0.0, 100 * (host1 - host0) / wall - result.server_cpu_pct - result.loadgen_cpu_pct)
        return result


def _cpu(tree: ProcessTree | None) -> tuple[float | None, float, float | None]:
    """(server tree, finished child processes i.e. wrk, whole host) CPU-seconds."""
    times = os.times()
    return (tree.cpu_seconds() if tree is not None else None), times.children_user + times.children_system, host_busy_seconds()
