#!/usr/bin/env bash
# The GPU figures of issue 15, in one call on a GPU host that reaches no package index:
#   1. the embedder alone (Qwen3-Embedding-0.6B's architecture, random weights, bf16, SDPA, eager)
#      per batch size and query length, against the compute floor;
#   2. the whole gateway -> gRPC -> Ray Serve path on that GPU (and the local backend beside it),
#      driven by wrk, against the raw floor of the same model on the same texts;
#   3. the embedder as CUDA graphs beside eager, with transformers' RMSNorms beside torch's fused one,
#      and under torch.compile, where time is left.
# It uses the host's own python3, PyTorch and transformers, and .gpu/ (loadtests/gpu_host/bundle.sh)
# for everything else. Stages write JSON and logs to $OUT as they finish, so a timeout keeps
# what was done. Stage 0 imports everything first: a missing package fails in seconds, not minutes.
#   OUT=/tmp/gpu-out bash loadtests/gpu_host/run.sh [stages: gputests,graph-memory,eager,graphs,fused-norms,fused-rotary,sdpa-gqa,levers,compiled-layers,paths,compile,compile-graphs]
set -uo pipefail
cd "$(dirname "$0")/../.."
PY="${PY:-python3}"
OUT="${OUT:-/tmp/gpu-out}"
STAGES="${1:-eager,graphs,paths,compile}"
BUNDLE="${BUNDLE:-.gpu}"
SITE_ROOT="${SITE_ROOT:-/tmp/mcp-classifier-gpu}"
# Seconds each stage may take, so the last stage can never eat the whole call.
EAGER_S="${EAGER_S:-130}" GRAPHS_S="${GRAPHS_S:-90}" PATHS_S="${PATHS_S:-280}" COMPILE_S="${COMPILE_S:-180}" LEVERS_S="${LEVERS_S:-150}" LAYERS_S="${LAYERS_S:-230}"
# The bench figures: rows of the embedder bench; client levels and batch of the path bench.
BATCH_SIZES="${BATCH_SIZES:-16,32,64,128,256,512}" QUERY_TOKENS="${QUERY_TOKENS:-16,32,64}" ROW_SECONDS="${ROW_SECONDS:-2}"
GRAPH_BATCH_SIZES="${GRAPH_BATCH_SIZES:-1,16,64,256,512,1024}"
CLIENTS="${CLIENTS:-1,8,32,64,256}" PATH_BATCH="${PATH_BATCH:-64}" DURATION="${DURATION:-6}" WARMUP="${WARMUP:-2}" RAW_SECONDS="${RAW_SECONDS:-3}"
PATH_SET="${PATH_SET:-ray-gpu,local-gpu}"
MODEL="${MODEL:-random:qwen3-embedding-0.6b}"
# --replica-access-log: the replica's line per call reaches the server log copied to $OUT (per-call times, docs/decisions/0003-gpu-whole-path-figures.md)
RAY_PATH="${RAY_PATH:---backend ray --replica-num-gpus 1 --min-replicas 1 --max-replicas 1 --ray-num-cpus 8 --replica-access-log}"
mkdir -p "$OUT" "$SITE_ROOT"
log="$OUT/run.log"
exec > >(tee -a "$log") 2>&1

[ -d "$SITE_ROOT/site" ] || tar -C "$SITE_ROOT" -xJf "$BUNDLE/site.tar.xz"
export PYTHONPATH="$PWD/services:$PWD:$SITE_ROOT/site${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$PWD/$BUNDLE/bin:$PATH" LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# No TOKENIZERS_PARALLELISM: the service's tokenizer_threads decides, as on a user's host.
export HF_HUB_OFFLINE=1 RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1

echo "== stage 0: the host and the imports"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv || true
"$PY" - <<'PY' || { echo "preflight failed: nothing measured"; exit 3; }
import importlib, sys
import torch, transformers
print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__,
      "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))
for name in ("ray", "ray.serve", "fastapi", "uvicorn", "grpc", "google.protobuf", "pydantic_settings", "opentelemetry.sdk",
             "mcp_classifier.cli", "mcp_classifier.wiring", "mcp_classifier.embedder.deployment", "mcp_classifier.embedder.local_cluster",
             "loadtests.bench_gpu", "loadtests.bench_paths"):
    importlib.import_module(name)
import ray, grpc, google.protobuf
print("ray", ray.__version__, "grpcio", grpc.__version__, "protobuf", google.protobuf.__version__, "imports ok")
PY
{ wrk --version 2>&1 || true; } | grep -m1 wrk || { echo "wrk does not run here"; exit 3; }  # it exits 1 even when it runs

status=0
if [[ ",$STAGES," == *,gputests,* ]]; then
  echo "== the tests that need CUDA (real graph capture)"
  timeout -k 10 60 "$PY" -m pytest -q -p no:cacheprovider tests/unit/test_cuda_graphs.py tests/integration/test_gpu_path.py -k "cuda_graph or fused_norms or fused_rotary" || status=1
fi
if [[ ",$STAGES," == *,graph-memory,* ]]; then
  echo "== the GPU memory the graphs take at load, per batch size (warming once leaked every layer's activations)"
  timeout -k 10 90 "$PY" -m loadtests.graph_memory --model "$MODEL" --batch-sizes 64,256 --json "$OUT/graph-memory.json" || status=1
fi
if [[ ",$STAGES," == *,eager,* ]]; then
  echo "== stage 1: the embedder alone, eager"
  timeout -k 10 "$EAGER_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes "$BATCH_SIZES" \
    --query-tokens "$QUERY_TOKENS" --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs off --json "$OUT/gpu-eager.json" || status=1
fi
if [[ ",$STAGES," == *,graphs,* ]]; then
  echo "== stage 2: the embedder alone, eager and as CUDA graphs side by side; then graphs at other lengths"
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes "$GRAPH_BATCH_SIZES" --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs both --json "$OUT/gpu-graphs.json" || status=1
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 256,512,1024 --query-tokens 16,64 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs on --json "$OUT/gpu-graphs-lengths.json" || status=1
fi
if [[ ",$STAGES," == *,fused-norms,* ]]; then
  echo "== stage 2b: transformers' RMSNorms beside torch's fused rms_norm, eager and as CUDA graphs (32- then 64-token queries)"
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512 --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs both --fused-norms both --profile-batch 256 --json "$OUT/gpu-fused-norms.json" || status=1
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 256 --query-tokens 64 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs on --fused-norms both --json "$OUT/gpu-fused-norms-64.json" || status=1
fi
if [[ ",$STAGES," == *,fused-rotary,* ]]; then
  echo "== stage 2c: transformers' rotary embeddings beside one compiled kernel a call (fused norms on), eager and as CUDA graphs"
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512 --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs both --fused-norms on --fused-rotary both --profile-batch 256 \
    --json "$OUT/gpu-fused-rotary.json" || status=1
fi
if [[ ",$STAGES," == *,sdpa-gqa,* ]]; then
  echo "== stage 2d: keys and values copied out to every query head (transformers under a mask) beside handed to SDPA grouped"
  timeout -k 10 "$GRAPHS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512 --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs both --fused-norms on --sdpa-gqa both --profile-batch 256 \
    --json "$OUT/gpu-sdpa-gqa.json" || status=1
fi
if [[ ",$STAGES," == *,levers,* ]]; then
  echo "== stage 2e: every GPU lever together (graphs, fused norms), fused rotary and SDPA GQA each off and on, 32-token queries up to batch 1024"
  # transformers reads TRANSFORMERS_SDPA_FORCE_GQA only in some versions: without it the GQA rows equal the others
  "$PY" -c "import inspect, transformers.integrations.sdpa_attention as m; print('transformers honours TRANSFORMERS_SDPA_FORCE_GQA:', 'TRANSFORMERS_SDPA_FORCE_GQA' in inspect.getsource(m))"
  timeout -k 10 "$LEVERS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512,1024 --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs on --fused-norms on --fused-rotary both --sdpa-gqa both --profile-batch 256 \
    --json "$OUT/gpu-levers.json" || status=1
fi
if [[ ",$STAGES," == *,compiled-layers,* ]]; then
  echo "== stage 2f: each layer of the model through torch.compile (one graph for all 28) beside fused rotary alone, as CUDA graphs; also two calls in flight"
  timeout -k 10 "$LAYERS_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512,1024 --query-tokens 32 \
    --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs on --fused-norms on --fused-rotary on --compiled-layers both --profile-batch 256 \
    --calls-in-flight 2 --texts 2048 --json "$OUT/gpu-compiled-layers.json" || status=1
fi
if [[ ",$STAGES," == *,paths,* ]]; then
  echo "== stage 3: gateway -> Ray Serve on the GPU (and the local backend beside it where PATH_SET names it)"
  path_args=()
  [[ ",$PATH_SET," == *,ray-gpu,* ]] && path_args+=(--path ray-gpu="$RAY_PATH")
  [[ ",$PATH_SET," == *,local-gpu,* ]] && path_args+=(--path local-gpu="--backend local")
  # token matching (on by default) scores on the GPU beside the forward: PATH_SET=ray-gpu,ray-gpu-tokens-off times it
  [[ ",$PATH_SET," == *,ray-gpu-tokens-off,* ]] && path_args+=(--path ray-gpu-tokens-off="$RAY_PATH --token-matching off")
  # rotary embeddings as one compiled kernel a call: PATH_SET=ray-gpu,ray-gpu-rotary
  [[ ",$PATH_SET," == *,ray-gpu-rotary,* ]] && path_args+=(--path ray-gpu-rotary="$RAY_PATH --fused-rotary on")
  # two replicas sharing the GPU, so two processes' event loops carry the per-request work: PATH_SET=ray-gpu,ray-gpu-two
  [[ ",$PATH_SET," == *,ray-gpu-two,* ]] && path_args+=(--path ray-gpu-two="$RAY_PATH --replica-num-gpus 0.5 --min-replicas 2 --max-replicas 2")
  # the replica tokenising on one thread, as the images had it before tokenizer_threads: PATH_SET=ray-gpu,ray-gpu-tok1
  [[ ",$PATH_SET," == *,ray-gpu-tok1,* ]] && path_args+=(--path ray-gpu-tok1="$RAY_PATH --tokenizer-threads 1")
  timeout -k 20 "$PATHS_S" "$PY" -m loadtests.bench_paths --model "$MODEL" --clients "$CLIENTS" --batch-size "$PATH_BATCH" \
    --duration "$DURATION" --warmup "$WARMUP" --raw-seconds "$RAW_SECONDS" --json "$OUT/paths-gpu.json" "${path_args[@]}" || status=1
  cp /tmp/bench-server-*.log "$OUT/" 2>/dev/null || true
fi
if [[ ",$STAGES," == *,compile,* ]]; then
  echo "== stage 4: the embedder alone, torch.compile"
  timeout -k 10 "$COMPILE_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 128,256,512 \
    --query-tokens 32 --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs off --compile --json "$OUT/gpu-compile.json" || status=1
fi
if [[ ",$STAGES," == *,compile-graphs,* ]]; then
  echo "== stage 5: torch.compile inside the CUDA graphs (fused elementwise kernels, launched as one graph)"
  timeout -k 10 "$COMPILE_S" "$PY" -m loadtests.bench_gpu --model "$MODEL" --batch-sizes 1,64,256,512 \
    --query-tokens 32 --seconds "$ROW_SECONDS" --matmul-size 8192 --cuda-graphs on --compile --json "$OUT/gpu-compile-graphs.json" || status=1
fi
echo "== done, status $status"
exit "$status"
