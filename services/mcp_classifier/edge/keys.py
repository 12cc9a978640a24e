"""Bearer API keys: from a comma-separated setting and/or a file (one key a line), compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from pathlib import Path

from ..util.file_watch import watch_file_in_thread

log = logging.getLogger(__name__)


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
    digest using hmac.compare_digest (equal lengths, no early exit), so timing reveals nothing.

    The keys file is re-read when its folder changes (``start()`` watches it: Kubernetes rotates
    a mounted Secret in place); the new digests replace the old in one assignment.
    """

    def __init__(self, inline: str | None, file: Path | None) -> None:
        self._inline = [k.strip() for k in (inline or "").split(",") if k.strip()]
        self._file = Path(file) if file is not None else None
        self._digests: tuple[bytes, ...] = ()
        self._stop_watch = threading.Event()
        self._load(initial=True)

    async def start(self) -> None:
        if self._file is not None:
            watch_file_in_thread(self._file, self._load, self._stop_watch)

    async def close(self) -> None:
        self._stop_watch.set()

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
                return
            keys += file_keys
        digests = tuple(dict.fromkeys(_digest(k) for k in keys))
        if not initial and digests != self._digests:  # the folder also changes for other files
            log.info("edge: api_keys_file %s changed: %d keys now", self._file, len(digests))
        self._digests = digests

    def verify(self, token: str) -> bool:
        presented = _digest(token)
        ok = False
        for digest in self._digests:
            ok |= hmac.compare_digest(presented, digest)
        return ok


def bearer_token(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` value (HTTP header or gRPC metadata), else None."""
    if authorization is None:
        return None
    scheme, _, credentials = authorization.strip().partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def key_fingerprint(token: str) -> str:
    """A stable, non-reversible id for a key (rate-limit buckets); never the key itself."""
    return hashlib.sha256(b"mcp-classifier-rate-limit\0" + token.encode("utf-8")).hexdigest()[:24]
