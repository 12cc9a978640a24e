"""GPU memory the CUDA graphs take at load, per captured bucket: what a replica must leave free beside its weights.

Graphs warmed at load once recorded autograd history, so each kept every layer's
activations alive: 25.6 GB for one bucket of 256 rows x 64 tokens of Qwen3-Embedding-0.6B, and
warming 36 buckets ran out of an H200's 140 GB. This
prints, for each batch size (the graphs' row cap), the memory allocated after loading, after
enabling the graphs, and the largest growth of one capture, so a fix or a regression shows in seconds.

Meant for a GPU host:
    python -m loadtests.graph_memory --model random:qwen3-embedding-0.6b --batch-sizes 64,256
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any

import orjson
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mcp_classifier.engine.accel import cuda_graphs
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.engine.options import EngineOptions

GB = 1e9


def measure(model: str, batch_size: int) -> dict[str, Any]:
    """One encoder as a GPU replica builds it (fused norms, then graphs warmed at query widths)."""
    growth: list[float] = []
    real_capture = cuda_graphs.capture_cuda_graph

    def traced(run: cuda_graphs.RunModel, inputs: torch.Tensor, pool: Any = None) -> tuple[cuda_graphs.Replay, torch.Tensor]:
        before = torch.cuda.memory_allocated()
        out = real_capture(run, inputs, pool)
        growth.append((torch.cuda.memory_allocated() - before) / GB)
        return out

    cuda_graphs.capture_cuda_graph = traced  # the graphs look it up per capture
    try:
        encoder = TextEncoder.load(model, device="cuda", options=EngineOptions(batch_size=batch_size, fused_norms="auto"))
        loaded = torch.cuda.memory_allocated() / GB
        enabled = encoder.enable_cuda_graphs()
        graphs = encoder.cuda_graphs
        row = {
            "batch_size": batch_size,
            "enabled": enabled,
            "graphs": len(graphs.shapes) if graphs else 0,
            "loaded_gb": loaded,
            "with_graphs_gb": torch.cuda.memory_allocated() / GB,
            "largest_capture_gb": max(growth, default=0.0),
        }
    finally:
        cuda_graphs.capture_cuda_graph = real_capture
    del encoder, graphs
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3-embedding-0.6b")
    parser.add_argument("--batch-sizes", default="64,256", help="the graphs' row caps, one encoder each")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device here: graph memory can only be measured on a GPU host", file=sys.stderr)
        return 2
    print(f"{args.model} on {torch.cuda.get_device_name()}\n")
    print("| batch size | graphs on | graphs | GB after load | GB with graphs | largest capture GB |")
    print("|---:|---|---:|---:|---:|---:|")
    rows = []
    for size in (int(s) for s in args.batch_sizes.split(",")):
        row = measure(args.model, size)
        rows.append(row)
        print(
            f"| {size} | {row['enabled']} | {row['graphs']} | {row['loaded_gb']:.2f} | {row['with_graphs_gb']:.2f} | "
            f"{row['largest_capture_gb']:.2f} |",
            flush=True,
        )
    if args.json:
        with open(args.json, "wb") as out:
            out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    return 0 if all(row["enabled"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
