"""Host and Origin allowlists (DNS-rebinding protection, as the MCP transport spec asks of servers).

An entry is ``[scheme://]host[:port]``: no scheme matches any scheme, no port (or ``:*``)
matches any port, ``*.example.com`` matches subdomains, and ``*`` matches everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
LOOPBACK_BIND = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class _Entry:
    scheme: str | None
    host: str  # lower case; IPv6 in brackets; may start with "*."
    port: str | None  # None: any port

    def matches(self, scheme: str | None, host: str, port: str | None) -> bool:
        if self.scheme is not None and scheme != self.scheme:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host


def split_host_port(value: str) -> tuple[str, str | None]:
    """'Example.com:80' -> ('example.com', '80'); '[::1]:8080' -> ('[::1]', '8080'); no port -> None."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return value, None
        host, rest = value[: end + 1], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") and rest[1:] else None
    if value.count(":") == 1:
        host, port = value.split(":")
        return host, port or None
    if value.count(":") > 1:  # a bare IPv6 address
        return f"[{value}]", None
    return value, None


def _parse_entry(raw: str) -> _Entry:
    raw = raw.strip().lower()
    scheme = None
    if "://" in raw:
        scheme, raw = raw.split("://", 1)
    host, port = split_host_port(raw.rstrip("/"))
    return _Entry(scheme, host, None if port in (None, "*") else port)


class Allowlist:
    def __init__(self, spec: str) -> None:
        items = [s for s in (p.strip() for p in spec.split(",")) if s]
        self.allow_all = "*" in items
        self.entries = tuple(_parse_entry(s) for s in items if s != "*")
        self.spec = ",".join(items)

    def host_allowed(self, host_header: str | None) -> bool:
        if self.allow_all:
            return True
        if not host_header:
            return False
        host, port = split_host_port(host_header)
        return any(e.matches(None, host, port) for e in self.entries)

    def origin_allowed(self, origin: str) -> bool:
        if self.allow_all:
            return True
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if not parts.scheme or not parts.netloc or parts.path not in ("", "/"):
            return False  # "null" (sandboxed pages, file://) and anything that is not an origin
        host, port = split_host_port(parts.netloc)
        return any(e.matches(parts.scheme.lower(), host, port) for e in self.entries)


def hosts_allowlist(spec: str, bind_host: str) -> Allowlist:
    """'auto': only loopback names when bound to loopback (what DNS rebinding attacks), else any host."""
    if spec.strip().lower() == "auto":
        return Allowlist(",".join(LOOPBACK_NAMES) if bind_host.strip().lower() in LOOPBACK_BIND else "*")
    return Allowlist(spec)
