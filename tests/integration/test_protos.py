"""The committed gRPC stubs are exactly what protos/ generates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPO_ROOT

GENERATED = tuple(f"{proto}{suffix}" for proto in ("classifier", "gateway") for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"))


def test_regenerating_the_stubs_changes_nothing(tmp_path: Path) -> None:
    subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "gen_protos.sh"), str(tmp_path)],
        check=True,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
    )
    committed = REPO_ROOT / "services" / "mcp_classifier" / "api" / "v1"
    for name in GENERATED:
        fresh = (tmp_path / "mcp_classifier" / "api" / "v1" / name).read_text()
        assert fresh == (committed / name).read_text(), f"{name} is stale: run scripts/gen_protos.sh"
