"""Embedder throughput against its compute floor, per batch size and query length.

floor tokens/s = measured matmul FLOP/s / (2 x non-embedding parameters): a forward costs about
2 FLOPs per weight per token, so no batch can beat that. Every row embeds texts of one length
(tokens counted by the encoder's tokenizer, the instruction prefix included), one ``encode`` call
per batch of one size, as the replicas run them, with the forward eager and as CUDA graphs
(``--cuda-graphs both``), with transformers' RMSNorms and with torch's fused one (``--fused-norms both``), with
transformers' rotary embeddings and with one compiled kernel a call (``--fused-rotary both``), with the grouped keys
and values copied out to every query head before attention, as transformers does whenever a mask is given,
or handed to SDPA as they are (``--sdpa-gqa both``; transformers 5.17 ignores the switch this uses, so there the rows
are alike), with each layer of the model's stack run through torch.compile (``--compiled-layers both``). Two figures per row: the model's part alone (texts tokenised
beforehand) and the whole call, tokenising included: on one CPU thread, and on the tokenizer's pool as the
service sizes it (``tokenizer_threads``: every CPU beside a GPU; ``--tokenizer-threads N`` sets it).

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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mcp_classifier.engine.accel.cuda_graphs import row_bucket
from mcp_classifier.engine.encoder import TextEncoder, pick_device
from mcp_classifier.engine.options import EngineOptions
from mcp_classifier.engine.tokenizer_threads import AUTO, resolve_tokenizer_threads, use_tokenizer_threads

WORDS = (
    "what how why explain the derivative integral of a function protein cell history empire war "
    "python code database network kubernetes cluster deploy weather recipe travel physics energy "
    "quantum entanglement algorithm sort list matrix eigenvalue revolution century dynasty"
).split()
PASS_TEXTS = 64  # texts per timed pass where batches are smaller: a pass of 1,024 lone texts took 25 s eager on the H100
TARGET_SHARE = 0.50  # issue 15: >= 50% of the compute floor for 32-token queries at the best batch size
# transformers copies each layer's keys and values out to every query head before SDPA whenever a mask is given
# (on CUDA; transformers.integrations.sdpa_attention.use_gqa_in_sdpa); this variable, read on every call, makes it
# pass them grouped with enable_gqa=True instead. §4's profile put two copies a layer at 9% of a batch.
FORCE_GQA_ENV = "TRANSFORMERS_SDPA_FORCE_GQA"
PROFILE_ROWS = 15  # kernels (CUDA) or ops (CPU) listed per profiled forward, by their own time


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


def batches_of(texts: list[str], size: int) -> list[list[str]]:
    """Whole batches only, so every call has the row's batch size."""
    return [texts[i : i + size] for i in range(0, len(texts) - size + 1, size)] or [texts[:size]]


def seconds_per_pass(run_pass: Callable[[], object], device: torch.device, min_seconds: float) -> float:
    run_pass()  # warm-up: kernels, allocator, graphs of new shapes, compiled shapes
    _sync(device)
    passes, started = 0, time.perf_counter()
    while True:
        run_pass()
        _sync(device)
        passes += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return elapsed / passes


def one_call_per_batch(encoder: TextEncoder, batch_size: int) -> None:
    """Batches of this size go through as one model call, graphed or not."""
    encoder.batch_size = batch_size
    if encoder.cuda_graphs is not None:
        encoder.cuda_graphs.max_rows = max(encoder.cuda_graphs.max_rows, row_bucket(batch_size))


def measure(encoder: TextEncoder, texts: list[str], batch_size: int, min_seconds: float, tokenizer_pool: int | None) -> dict[str, float]:
    """One row: per batch, the model's part alone (tokenised beforehand) and the whole encode() call.

    The whole call twice: tokenising on one thread, then on the tokenizer's pool (``tokenizer_pool``
    threads, None: every CPU), the switch being read on every batch.
    """
    one_call_per_batch(encoder, batch_size)
    batches = batches_of(texts[: max(batch_size, PASS_TEXTS)], batch_size)
    tokenized = [encoder.tokens.tokenize(batch) for batch in batches]
    tokens = sum(len(ids) for features in tokenized for ids in features["input_ids"])
    count = sum(len(batch) for batch in batches)
    model_s = seconds_per_pass(lambda: [encoder.encode_tokenized(f) for f in tokenized], encoder.device, min_seconds)
    use_tokenizer_threads(1)
    one_thread_s = seconds_per_pass(lambda: [encoder.encode(batch) for batch in batches], encoder.device, min_seconds)
    whole_s = one_thread_s
    if tokenizer_pool != 1:
        use_tokenizer_threads(tokenizer_pool)
        whole_s = seconds_per_pass(lambda: [encoder.encode(batch) for batch in batches], encoder.device, min_seconds)
    return {
        "query_tokens": tokens / count,
        "batch_size": batch_size,
        "ms_per_batch": 1000 * model_s / len(batches),
        "tokens_per_s": tokens / model_s,
        "texts_per_s": count / model_s,
        "texts_per_s_with_tokenizing": count / whole_s,
        "tokens_per_s_with_tokenizing": tokens / whole_s,
        "texts_per_s_tokenizing_on_one_thread": count / one_thread_s,
        "tokens_per_s_tokenizing_on_one_thread": tokens / one_thread_s,
    }


def tokens_per_s_in_flight(encoder: TextEncoder, texts: list[str], batch_size: int, calls: int, min_seconds: float) -> float | None:
    """The model's part with ``calls`` batches in flight on as many threads, or None where there are not that many batches.

    Why: a call's host work (packing, bucketing the inputs, pooling's copies, back to numpy) leaves the
    GPU idle between serial calls (5 ms of a 25 ms batch of 256 on the H200); with a second call in
    flight, one call's host work can run under the other's kernels, as a replica with two forward
    threads would let it.
    """
    if calls < 2 or len(texts) < batch_size * calls:
        return None
    one_call_per_batch(encoder, batch_size)
    tokenized = [encoder.tokens.tokenize(batch) for batch in batches_of(texts[: batch_size * calls], batch_size)]
    tokens = sum(len(ids) for features in tokenized for ids in features["input_ids"])
    with ThreadPoolExecutor(max_workers=calls, thread_name_prefix="in-flight") as pool:
        seconds = seconds_per_pass(lambda: list(pool.map(encoder.encode_tokenized, tokenized)), encoder.device, min_seconds)
    return tokens / seconds


def profile_batch(encoder: TextEncoder, texts: list[str], batch_size: int) -> dict[str, Any]:
    """Where one batch's model part goes: torch's profiler, kernels by their own GPU time (ops by CPU time on a CPU).

    The time a batch takes beyond its matmuls was estimated by counting memory passes (docs/decisions/0018-fused-norms.md);
    this measures it, per kernel, in one call.
    """
    from torch.profiler import ProfilerActivity, profile

    one_call_per_batch(encoder, batch_size)
    features = encoder.tokens.tokenize(texts[:batch_size])
    encoder.encode_tokenized(features)  # warm: graphs of this shape captured, allocator settled
    _sync(encoder.device)
    on_gpu = encoder.device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]) as trace:
        started = time.perf_counter()
        encoder.encode_tokenized(features)
        _sync(encoder.device)
        wall_ms = 1000 * (time.perf_counter() - started)
    averages = trace.key_averages()
    own_us = [e.self_device_time_total if on_gpu else e.self_cpu_time_total for e in averages]
    total_us = sum(own_us)
    ranked = sorted(zip(averages, own_us), key=lambda pair: pair[1], reverse=True)[:PROFILE_ROWS]
    return {
        "batch_size": len(features["input_ids"]),
        "wall_ms": wall_ms,
        "measured": "GPU kernels" if on_gpu else "CPU ops",
        "total_ms": total_us / 1000,
        "top": [{"name": e.key, "calls": e.count, "ms": us / 1000, "share": us / total_us if total_us else 0.0} for e, us in ranked],
    }


def print_profile(forward: str, report: dict[str, Any]) -> None:
    print(
        f"\nprofile, {forward}, batch of {report['batch_size']}: {report['total_ms']:.2f} ms of {report['measured']} "
        f"in a {report['wall_ms']:.2f} ms call"
    )
    print("| kernel or op | calls | own ms | share |")
    print("|---|---:|---:|---:|")
    for row in report["top"]:
        print(f"| {row['name'][:90]} | {row['calls']} | {row['ms']:.3f} | {row['share']:.1%} |")


def add_variant_flag(parser: argparse.ArgumentParser, flag: str, default: str, rows: str) -> None:
    """A forward variant measured on, off, or each in turn (both): every such flag reads the same way."""
    parser.add_argument(flag, choices=["both", "on", "off"], default=default, help=f"{rows}, or each in turn (both) [default: {default}]")


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
    add_variant_flag(parser, "--cuda-graphs", "both", "rows with the forward as CUDA graphs (on), eager (off)")
    add_variant_flag(
        parser, "--fused-norms", "off", "rows with the model's RMSNorms on torch's fused op (on), as transformers runs them (off)"
    )
    add_variant_flag(
        parser,
        "--fused-rotary",
        "off",
        "rows with the rotary embeddings applied by one torch.compile'd kernel a call (on), as transformers applies them (off)",
    )
    add_variant_flag(
        parser,
        "--sdpa-gqa",
        "off",
        "rows with the grouped keys and values handed to SDPA as they are (on), copied out to every query head as "
        "transformers does under a mask (off)",
    )
    add_variant_flag(
        parser,
        "--compiled-layers",
        "off",
        "rows with each layer of the model's stack run through torch.compile, one graph shared by all (on), as the model runs them (off)",
    )
    parser.add_argument(
        "--profile-batch",
        type=int,
        default=0,
        metavar="N",
        help="after each forward's rows, profile one batch of N texts of the first query length: the top kernels by GPU time "
        "(ops by CPU time on a CPU) [default: 0, off]",
    )
    parser.add_argument(
        "--tokenizer-threads",
        type=int,
        default=AUTO,
        metavar="N",
        help="the tokenizer's pool for the 'with tokenising' figures, beside one thread; 0: as the service sizes it on this "
        "device (every CPU beside a GPU, torch's threads on a CPU) [default: 0]",
    )
    parser.add_argument(
        "--calls-in-flight",
        type=int,
        default=1,
        metavar="N",
        help="also time the model's part with N batches in flight on N threads (needs N x batch texts; --texts) [default: 1, off]",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures to FILE as JSON")
    args = parser.parse_args(argv)
    if args.device != "cpu" and not torch.cuda.is_available():
        print("no CUDA device here: run with --device cpu for a CPU figure (the floor then means little)", file=sys.stderr)
        if args.device == "cuda":
            return 2
    modes = ["off", "on"] if args.cuda_graphs == "both" else [args.cuda_graphs]  # eager first: the encoder starts without graphs
    if "on" in modes and args.device == "cpu":
        print("CUDA graphs need a CUDA device: rows with --cuda-graphs off only", file=sys.stderr)
        modes = ["off"]
    tokenizer_pool = resolve_tokenizer_threads(
        args.tokenizer_threads, on_gpu=pick_device(args.device).type == "cuda", model_cpus=torch.get_num_threads()
    )
    pool_words = f"{tokenizer_pool} threads" if tokenizer_pool else f"every CPU ({os.cpu_count()})"
    use_tokenizer_threads(tokenizer_pool)  # before the encoder loads (it tokenises): the pool keeps the size it starts with
    encoder = TextEncoder.load(
        args.model, device=args.device, dtype=args.dtype, options=EngineOptions(forward_overhead_tokens=1e9, pack_width=0)
    )  # one forward per batch
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
        f"matmul {flops / 1e12:.2f} TFLOP/s -> compute floor {floor:,.0f} tokens/s\n"
        f"tokenising: on one thread, and on the tokenizer's pool of {pool_words}"
    )
    print(header + "\n", flush=True)
    print(
        "| query tokens | batch | forward | ms per batch | tokens/s | texts/s | share of floor | texts/s tokenising on one thread | "
        f"texts/s tokenising on the pool | share with tokenising (pool) | share, {args.calls_in_flight} calls in flight |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    profiles: dict[str, dict[str, Any]] = {}
    norm_modes = ["off", "on"] if args.fused_norms == "both" else [args.fused_norms]  # transformers' first: fusing is one way
    rotary_modes = ["off", "on"] if args.fused_rotary == "both" else [args.fused_rotary]
    gqa_modes = ["off", "on"] if args.sdpa_gqa == "both" else [args.sdpa_gqa]
    layer_modes = ["off", "on"] if args.compiled_layers == "both" else [args.compiled_layers]
    variants = [
        (norms, rotary, gqa, layers, mode)
        for norms in norm_modes
        for rotary in rotary_modes
        for gqa in gqa_modes
        for layers in layer_modes
        for mode in modes
    ]
    force_gqa_before = os.environ.get(FORCE_GQA_ENV)
    for norms, rotary, gqa, layers, mode in variants:
        if norms == "on" and not encoder.fused_norm_layers and not encoder.fuse_norms():
            print("| the model's norms could not be fused (see the log): no fused-norm rows |")
            break
        if rotary == "off" and encoder.fused_rotary_layers:
            encoder.unfuse_rotary()
        if rotary == "on" and not encoder.fused_rotary_layers and not encoder.fuse_rotary():
            print("| the rotary embeddings could not be compiled (see the log): no fused-rotary rows |")
            continue
        os.environ[FORCE_GQA_ENV] = "1" if gqa == "on" else "0"
        if layers == "off" and encoder.compiled_layer_count:
            encoder.uncompile_layers()
        if layers == "on" and not encoder.compiled_layer_count and not encoder.compile_layers():
            print("| the model's layers could not be compiled (see the log): no compiled-layer rows |")
            continue
        encoder.disable_cuda_graphs()  # captured afresh per variant: a graph replays the kernels it recorded
        if mode == "on" and not encoder.enable_cuda_graphs():
            print("| CUDA graphs could not be enabled for this model (see the log): no graph rows |")
            continue
        forward = (
            ("CUDA graphs" if mode == "on" else "eager")
            + (", fused norms" if norms == "on" else "")
            + (", fused rotary" if rotary == "on" else "")
            + (", SDPA GQA" if gqa == "on" else "")
            + (", compiled layers" if layers == "on" else "")
            + (", compiled" if args.compile else "")
        )
        for length in (int(t) for t in args.query_tokens.split(",")):
            texts = texts_of_length(encoder, length, args.texts)
            for batch_size in (int(b) for b in args.batch_sizes.split(",")):
                row = {"forward": forward, **measure(encoder, texts, batch_size, args.seconds, tokenizer_pool)}
                row["share"] = row["tokens_per_s"] / floor
                row["share_with_tokenizing"] = row["tokens_per_s_with_tokenizing"] / floor
                row["share_tokenizing_on_one_thread"] = row["tokens_per_s_tokenizing_on_one_thread"] / floor
                in_flight = tokens_per_s_in_flight(encoder, texts, batch_size, args.calls_in_flight, args.seconds)
                row["share_in_flight"] = None if in_flight is None else in_flight / floor
                rows.append(row)
                print(
                    f"| {row['query_tokens']:.0f} | {batch_size} | {forward} | {row['ms_per_batch']:.2f} | {row['tokens_per_s']:,.0f} | "
                    f"{row['texts_per_s']:,.1f} | {row['share']:.1%} | {row['texts_per_s_tokenizing_on_one_thread']:,.1f} | "
                    f"{row['texts_per_s_with_tokenizing']:,.1f} | "
                    f"{row['share_with_tokenizing']:.1%} | "
                    + ("-" if row["share_in_flight"] is None else f"{row['share_in_flight']:.1%}")
                    + " |",
                    flush=True,
                )
        if args.profile_batch:  # while the encoder still runs this forward
            first_length = int(args.query_tokens.split(",")[0])
            texts = texts_of_length(encoder, first_length, max(args.texts, args.profile_batch))
            profiles[forward] = profile_batch(encoder, texts, args.profile_batch)
    if force_gqa_before is None:
        os.environ.pop(FORCE_GQA_ENV, None)
    else:
        os.environ[FORCE_GQA_ENV] = force_gqa_before
    near32 = [r for r in rows if abs(r["query_tokens"] - 32) <= 4]
    for forward in dict.fromkeys(r["forward"] for r in near32):
        best = max((r for r in near32 if r["forward"] == forward), key=lambda r: r["share"])
        print(
            f"32-token queries, {forward}: best {best['share']:.1%} of the compute floor at batch {best['batch_size']} "
            f"({best['share_with_tokenizing']:.1%} with tokenising on the pool, {best['share_tokenizing_on_one_thread']:.1%} on one "
            f"thread; target >= {TARGET_SHARE:.0%})"
        )
        in_flight = [r for r in near32 if r["forward"] == forward and r["share_in_flight"] is not None]
        if in_flight:
            best = max(in_flight, key=lambda r: r["share_in_flight"])
            print(f"  with {args.calls_in_flight} calls in flight: best {best['share_in_flight']:.1%} at batch {best['batch_size']}")
    for forward, report in profiles.items():
        print_profile(forward, report)
    if args.json:
        document = {"header": header, "floor_tokens_per_s": floor, "tokenizer_pool": tokenizer_pool, "rows": rows, "profiles": profiles}
        args.json.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
