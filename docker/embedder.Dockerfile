# syntax=docker/dockerfile:1.7
#
# Embedder image: the Ray node image for the RayService's head and GPU workers. Ray Serve imports
# mcp_classifier.embedder.deployment:build_app from it (serveConfigV2), and the Serve gRPC proxy loads the
# servicer from mcp_classifier.api.v1 — so the package is installed into the image's Python, next to Ray.
#
# The Ray version is the base image's tag. It must equal the chart's embedder.rayVersion (the RayService's
# rayVersion) and satisfy pyproject.toml's ray requirement: tests/test_dockerfiles.py checks both.
#
# Python packages: torch from PyTorch's CUDA index, pinned by version (that index is not reachable where the lock is
# made); everything else from docker/embedder-requirements.lock, every package pinned with its sha256 (pip
# --require-hashes; regenerate with `bash scripts/lock_images.sh`), then this package without dependencies.
#
# The weights (docs/kubernetes.md#model-delivery): with MODEL and MODEL_REVISION (a 40-hex commit) the build bakes that
# snapshot as a hub cache at /opt/mcp-classifier/models, which the chart's embedder.modelDelivery.mode image reads
# offline. A gated model's token comes from a build secret, never from an ARG or ENV:
#   docker build -f docker/embedder.Dockerfile --build-arg MODEL=Qwen/Qwen3-Embedding-0.6B \
#     --build-arg MODEL_REVISION=97b0c614be4d77ee51c0cef4e5f07c00f9eb65b3 [--secret id=hf_token,env=HF_TOKEN] \
#     -t ghcr.io/mcp-classifier/embedder:0.1.0-qwen3 .
#
# The base image: no digest of rayproject/ray:2.60.0-py311-gpu could be confirmed from published material when this was
# written, so it is pinned by tag. Pin it where you build: `docker buildx imagetools inspect
# rayproject/ray:2.60.0-py311-gpu`, then FROM rayproject/ray:2.60.0-py311-gpu@sha256:<digest>.
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
# the baked hub cache (MODEL): owned by the ray user, read-only to the pods in practice
USER root
RUN mkdir -p /opt/mcp-classifier/models && chown 1000:100 /opt/mcp-classifier/models
# The base image's user is ray (uid 1000, gid 100) and owns its Python environment.
USER 1000:100
COPY --chown=1000:100 pyproject.toml README.md docker/embedder-requirements.lock /tmp/mcp-classifier/
COPY --chown=1000:100 services /tmp/mcp-classifier/services
RUN pip install --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION" \
 && pip install --require-hashes --no-deps -r /tmp/mcp-classifier/embedder-requirements.lock \
 && pip install --no-deps "/tmp/mcp-classifier" \
 && rm -rf /tmp/mcp-classifier
ARG MODEL=""
ARG MODEL_REVISION=""
RUN --mount=type=secret,id=hf_token,required=false \
    if [ -n "$MODEL" ]; then \
      echo "$MODEL_REVISION" | grep -Eq '^[0-9a-f]{40}$' || { echo "MODEL_REVISION must be a 40-hex commit of $MODEL" >&2; exit 1; }; \
      HF_TOKEN_PATH=/run/secrets/hf_token python -c "import sys; from huggingface_hub import snapshot_download; \
print(snapshot_download(sys.argv[1], revision=sys.argv[2], cache_dir='/opt/mcp-classifier/models'))" "$MODEL" "$MODEL_REVISION"; \
    fi
# Fail the build when Ray drifted from the tag, torch from its pin, or the Serve application does not import.
RUN python -c "import ray, torch, mcp_classifier.embedder.deployment as d; \
assert ray.__version__ == '$RAY_VERSION', ray.__version__; assert torch.__version__.split('+')[0] == '$TORCH_VERSION', torch.__version__; \
print('ray', ray.__version__, 'torch', torch.__version__, d.__name__)"
WORKDIR /home/ray
