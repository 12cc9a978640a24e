"""Keys for what is computed from a model and kept on disk: its files, the libraries that run it, the folder and its pruning.

The start cache (classify) keys the category texts' embeddings by it, the probe cache (engine) the
load-time checks' results: both must change whenever the model's files, this package or a library
that computes with them changes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from .. import __version__

LIBRARIES = ("torch", "transformers", "numpy", "scikit-learn", "rank-bm25")


def prune_least_recent(directory: Path, pattern: str, keep: int) -> None:
    """Keep the ``keep`` files matching ``pattern`` touched last (read or written): what starts no longer use goes."""
    touched: list[tuple[int, Path]] = []
    for entry in directory.glob(pattern):
        try:
            touched.append((entry.stat().st_mtime_ns, entry))
        except FileNotFoundError:  # pruned meanwhile by a replica starting beside this one
            continue
    for _, stale in sorted(touched, reverse=True)[keep:]:
        stale.unlink(missing_ok=True)


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/mcp-classifier, else ~/.cache/mcp-classifier."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-classifier"


def _library_versions() -> str:
    versions = []
    for name in LIBRARIES:
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=none")
    return ",".join(versions)


def model_signature(model_dir: str | None, description: Sequence[object]) -> str | None:
    """A key for everything a result computed from the model depends on: the model's files (name, size, mtime), the
    caller's settings in ``description``, this package's and the libraries' versions. None: not cacheable (no files)."""
    if model_dir is None or not Path(model_dir).is_dir():
        return None
    files = []
    for path in sorted(Path(model_dir).rglob("*")):
        if path.is_file():
            stat = path.stat()
            files.append(f"{path.relative_to(model_dir)}:{stat.st_size}:{stat.st_mtime_ns}")
    parts = [f"package={__version__}", _library_versions(), *map(str, description), *files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
