#!/usr/bin/env bash
# Regenerates the gRPC stubs from protos/ into services/ (committed; tests/test_protos.py checks they match).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
OUT="${1:-services}"
"$PY" -m grpc_tools.protoc -Iprotos --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" \
  protos/mcp_classifier/api/v1/classifier.proto protos/mcp_classifier/api/v1/gateway.proto
