"""Embedder throughput against its compute floor, per batch size and query length.

floor tokens/s = measured matmul FLOP/s / (2 x non-embedding parameters): a forward costs about
2 FLOPs per weight per token, so no batch can beat that. Every row embeds texts of one length
(tokens counted by the encoder's tokenizer, the instruction prefix included), in batches of one
size, as the replicas run them.

``--model random:qwen3-embedding-0.6b`` builds the exact architecture of Qwen3-Embedding-0.6B with
random weights (no download): throughput depends on the shapes, not the weights. The report names
the device, dtype, attention implementation and whether torch.compile was used.

Meant for a GPU host (bf16, SDPA); on CPU it runs too (--device cpu) but the figures mean little.
    python -m loadtests.bench_gpu --model random:qwen3-embedding-0.6b --batch-sizes 16,32,64,128,256 --query-tokens 16,32,64
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import orjson
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mcp_classifier.core.encoder import TextEncoder

WORDS = (
    "what how why explain the derivative integral of a function protein cell history empire war "
    "python code database network kubernetes cluster deploy weather recipe travel physics energy "
    "quantum entanglement algorithm sort list matrix eigenvalue revolution century dynasty"
).split()
TARGET_SHARE = 0.50  # issue 15: >= 50% of the compute floor for 32-token queries at the best batch size


def texts_of_length(encoder: TextEncoder, tokens: int, n: int, seed: int = 0) -> list[str]:
    """n different queries, instruction prefix included (as the replicas embed them), of about ``tokens`` tokens each."""
    rng = random.Random(seed)
    tokenizer = encoder.tokenizer
    fixed = encoder.token_counts([encoder.format_query("")])[0]  # the prefix and special tokens
    body = max(1, tokens - fixed)
    out = []
    for _ in range(n):
        ids = tokenizer(" ".join(rng.choice(WORDS) for _ in range(body * 2)), add_special_tokens=False)["input_ids"][:body]
        out.append(encoder.format_query(tokenizer.decode(ids)))
    return out


def matmul_flops(device: torch.device, dtype: torch.dtype, size: int = 4096, repeats: int = 20) -> float:
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - started)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def non_embedding_params(model: torch.nn.Module) -> int:
    """Embedding tables are looked up, not multiplied: only the other weights cost FLOPs per token."""
    embedding = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    return sum(p.numel() for p in model.parameters()) - embedding


def measure(encoder: TextEncoder, texts: list[str], batch_size: int, min_seconds: float) -> tuple[float, float, float]:
    """(tokens/s, texts/s, mean tokens per text) over repeated passes of ``texts`` in batches of ``batch_size``."""
    encoder.batch_size = batch_size
    encoder.encode(texts[: batch_size * 2])  # warm-up: kernels, allocator, compiled shapes
    _sync(encoder.device)
    counts = encoder.token_counts(texts)
    passes, started = 0, time.perf_counter()
    while True:
        encoder.encode(texts)
        _sync(encoder.device)
        passes += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            break
    return passes * sum(counts) / elapsed, passes * len(texts) / elapsed, sum(counts) / len(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="builtin:minilm", help="any model, or random:qwen3-embedding-0.6b [default: builtin:minilm]")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", help="auto: bf16 on CUDA (fp16 where bf16 is missing), fp32 on CPU")
    parser.add_argument("--batch-sizes", default="1,32,128,512")
    parser.add_argument("--query-tokens", default="16,32,64", help="query lengths in tokens, one row group each [default: 16,32,64]")
    parser.add_argument("--texts", type=int, default=1024, help="texts per length [default: 1024]")
    parser.add_argument("--seconds", type=float, default=3.0, help="least measured seconds per row [default: 3]")
    parser.add_argument("--matmul-size", type=int, default=4096)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (dynamic shapes) before measuring")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE as JSON")
    args = parser.parse_args(argv)
    if args.device != "cpu" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu for a CPU figure (the floor then means little)", file=sys.stderr)
        if args.device == "cuda":
            return 2
    encoder = TextEncoder(args.model, device=args.device, dtype=args.dtype, forward_overhead_tokens=1e9)  # one forward per batch
    if args.compile:
        encoder.model = torch.compile(encoder.model, dynamic=True)
    params = non_embedding_params(encoder.model)
    flops = matmul_flops(encoder.device, encoder.dtype, args.matmul_size if encoder.device.type == "cuda" else 1024)
    floor = flops / (2 * params)
    name = torch.cuda.get_device_name(encoder.device) if encoder.device.type == "cuda" else "cpu"
    attention = getattr(getattr(encoder.model, "config", None), "_attn_implementation", "?")
    header = (
        f"device {name}, dtype {str(encoder.dtype).removeprefix('torch.')}, attention {attention}, "
        f"torch.compile {'on' if args.compile else 'off'}, model {args.model} ({params / 1e6:.1f} M non-embedding params)\n"
        f"matmul {flops / 1e12:.2f} TFLOP/s -> compute floor {floor:,.0f} tokens/s"
    )
    print(header + "\n", flush=True)
    print("| query tokens | batch | tokens/s | texts/s | share of compute floor |")
    print("|---:|---:|---:|---:|---:|")
    rows = []
    for length in (int(t) for t in args.query_tokens.split(",")):
        texts = texts_of_length(encoder, length, args.texts)
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            tok_s, text_s, mean_tokens = measure(encoder, texts, batch_size, args.seconds)
            rows.append(
                {
                    "query_tokens": mean_tokens,
                    "batch_size": batch_size,
                    "tokens_per_s": tok_s,
                    "texts_per_s": text_s,
                    "share": tok_s / floor,
                }
            )
            print(f"| {mean_tokens:.0f} | {batch_size} | {tok_s:,.0f} | {text_s:,.1f} | {tok_s / floor:.1%} |", flush=True)
    near32 = [r for r in rows if abs(r["query_tokens"] - 32) <= 4]
    if near32:
        best = max(near32, key=lambda r: r["share"])
        print(
            f"\n32-token queries: best {best['share']:.1%} of the compute floor at batch {best['batch_size']} (target >= {TARGET_SHARE:.0%})"
        )
    if args.json:
        args.json.write_bytes(orjson.dumps({"header": header, "floor_tokens_per_s": floor, "rows": rows}, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
