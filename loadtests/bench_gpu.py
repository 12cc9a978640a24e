"""GPU throughput of the embedder against its compute floor.

floor tokens/s = measured matmul FLOP/s / (2 x non-embedding parameters): a forward costs about
2 FLOPs per weight per token, so no batch can beat that. Prints tokens/s and the share of the floor for
several batch sizes (length-sorted, as the replicas run them). Meant for a GPU host; on CPU it
runs too (--device cpu) but the numbers only mean something on a GPU.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

WORDS = (
    "what how why explain the derivative integral of a function protein cell history empire war "
    "python code database network kubernetes cluster deploy weather recipe travel physics energy "
    "quantum entanglement algorithm sort list matrix eigenvalue revolution century dynasty"
).split()


def synthetic_queries(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(n)]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="builtin:minilm")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--batch-sizes", default="1,32,128,512")
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--matmul-size", type=int, default=4096)
    args = parser.parse_args(argv)
    if args.device != "cpu" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu for a CPU figure (the floor then means little)", file=sys.stderr)
        if args.device == "cuda":
            return 2
    texts = synthetic_queries(args.texts)
    rows = []
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        classifier = build_classifier(Settings(model=args.model, device=args.device, batch_size=batch_size))
        encoder = classifier.encoder
        encoder.encode(texts[: min(len(texts), batch_size * 2)])  # warm-up: kernels, allocator
        _sync(encoder.device)
        tokens = sum(encoder.token_counts(texts))
        started = time.perf_counter()
        encoder.encode(texts)
        _sync(encoder.device)
        elapsed = time.perf_counter() - started
        rows.append((batch_size, tokens / elapsed, len(texts) / elapsed))
    # Embedding tables are looked up, not multiplied: only the other weights cost FLOPs per token.
    embedding_params = sum(p.numel() for m in encoder.model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    params = sum(p.numel() for p in encoder.model.parameters()) - embedding_params
    flops = matmul_flops(encoder.device, encoder.dtype, args.matmul_size if encoder.device.type == "cuda" else 1024)
    floor = flops / (2 * params)
    name = torch.cuda.get_device_name(encoder.device) if encoder.device.type == "cuda" else "cpu"
    print(
        f"device {name}, dtype {str(encoder.dtype).removeprefix('torch.')}, model {args.model} ({params / 1e6:.1f} M non-embedding params)"
    )
    print(f"matmul {flops / 1e12:.2f} TFLOP/s -> compute floor {floor:,.0f} tokens/s\n")
    print("| batch | tokens/s | texts/s | % of compute floor |")
    print("|---:|---:|---:|---:|")
    for batch_size, tok_s, text_s in rows:
        print(f"| {batch_size} | {tok_s:,.0f} | {text_s:,.1f} | {100 * tok_s / floor:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
