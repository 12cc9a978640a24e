"""Bearer API keys: from a comma-separated setting and/or a file (one key a line), compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time
from pathlib import Path

log = logging.getLogger(__name__)

FILE_RECHECK_S = 2.0  # how often the keys file's mtime is looked at (Kubernetes rotates Secrets in place)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def parse_keys_file(text: str) -> list[str]:
    keys = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(line)
    return keys


class ApiKeys:
    """Keys are kept only as SHA-256 digests; a presented token is hashed and compared with every
    digest using hmac.compare_digest (equal lengths, no early exit), so timing reveals nothing."""

    def __init__(self, inline: str | None, file: Path | None) -> None:
        self._inline = [k.strip() for k in (inline or "").split(",") if k.strip()]
        self._file = Path(file) if file is not None else None
        self._file_mtime: float | None = None
        self._file_checked = 0.0
        self._digests: tuple[bytes, ...] = ()
        self._load(initial=True)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    @property
    def count(self) -> int:
        return len(self._digests)

    def _load(self, *, initial: bool = False) -> None:
        keys = list(self._inline)
        if self._file is not None:
            try:
                stat = self._file.stat()
                file_keys = parse_keys_file(self._file.read_text("utf-8"))
            except OSError as exc:
                if initial:
                    raise OSError(f"cannot read api_keys_file {self._file}: {exc}") from exc
                log.warning("edge: cannot re-read api_keys_file %s (%s); keeping the keys loaded before", self._file, exc)
                return
            if not file_keys and initial and not keys:
                raise OSError(f"api_keys_file {self._file} holds no keys (one key a line; # starts a comment)")
            if not file_keys and not initial:
                log.warning("edge: api_keys_file %s now holds no keys; keeping the keys loaded before", self._file)
                self._file_mtime = stat.st_mtime
                return
            self._file_mtime = stat.st_mtime
            keys += file_keys
            if not initial:
                log.info("edge: api_keys_file %s changed: %d keys now", self._file, len(file_keys))
        self._digests = tuple(dict.fromkeys(_digest(k) for k in keys))

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if self._file is None or now - self._file_checked < FILE_RECHECK_S:
            return
        self._file_checked = now
        try:
            mtime = os.stat(self._file).st_mtime
        except OSError:
            mtime = None
        if mtime != self._file_mtime:
            self._load()

    def verify(self, token: str) -> bool:
        self._maybe_reload()
        presented = _digest(token)
        ok = False
        for digest in self._digests:
            ok |= hmac.compare_digest(presented, digest)
        return ok


def key_fingerprint(token: str) -> str:
    """A stable, non-reversible id for a key (rate-limit buckets); never the key itself."""
    return hashlib.sha256(b"mcp-classifier-rate-limit\0" + token.encode("utf-8")).hexdigest()[:24]
