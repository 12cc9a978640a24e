"""MCP 2026-07-28, the stateless revision: how a request proves its era, and what its answers carry.

No `initialize`: each request carries its protocol version and the client's capabilities in
``params._meta``, and over HTTP the routing headers must repeat what the body says. The checks
run in the order the official SDK and conformance suite expect (first failure wins): the `_meta`
envelope, then the headers against the body, then the version itself. Transports pass the
headers in; this module knows no HTTP.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from .excerpts import clip, excerpt
from .jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
    Request,
)

STATELESS_VERSION = "2026-07-28"
STATELESS_VERSIONS = (STATELESS_VERSION,)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# Methods the revision removed: in this era they are unknown (-32601, HTTP 404) like any other.
REMOVED_METHODS = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
# Results a client may cache (they carry ttlMs and cacheScope).
CACHEABLE_METHODS = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"})
# Methods whose target is named in Mcp-Name, and the params field it must equal.
NAMED_TARGETS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
BASE64_SENTINEL = ("=?base64?", "?=")

# HTTP status of a JSON-RPC error in this era (spec: streamable HTTP; the SDK's inbound table).
# Every other code, internal and backend errors included, is answered with HTTP 200.
HTTP_STATUS_FOR_CODE = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def is_stateless_request(protocol_version_header: str | None) -> bool:
    """The era is chosen by the header: absent or a handshake version keeps the handshake era unchanged,
    anything else (2026-07-28, or a version we do not know) is answered by this era's rules."""
    return protocol_version_header is not None and protocol_version_header.strip() not in HANDSHAKE_VERSIONS


def all_supported_versions() -> list[str]:
    return [*STATELESS_VERSIONS, *reversed(HANDSHAKE_VERSIONS)]


@dataclass(frozen=True)
class RoutingHeaders:
    """Every value received for each routing header (a header sent twice is an error of its own)."""

    protocol_version: tuple[str, ...] = ()
    method: tuple[str, ...] = ()
    name: tuple[str, ...] = ()


def decode_header_value(value: str) -> str:
    """Mcp-Name may carry a non-ASCII name as =?base64?<UTF-8 in base64>?=; surrounding whitespace is HTTP's, not the name's."""
    value = value.strip()
    prefix, suffix = BASE64_SENTINEL
    if value.startswith(prefix) and value.endswith(suffix) and len(value) > len(prefix) + len(suffix):
        try:
            return base64.b64decode(value[len(prefix) : -len(suffix)], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return value
    return value


def check_request(request: Request, headers: RoutingHeaders) -> None:
    """Raise the JsonRpcError this era owes a request, or return when it may be dispatched."""
    for header, values in (("MCP-Protocol-Version", headers.protocol_version), ("Mcp-Method", headers.method), ("Mcp-Name", headers.name)):
        if len(values) > 1:
            raise JsonRpcError(HEADER_MISMATCH, f"the {header} header appears {len(values)} times; send it once")
    meta = request.params.get("_meta")
    if not isinstance(meta, dict):
        raise JsonRpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying {META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r} (MCP {STATELESS_VERSION})",
        )
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise JsonRpcError(INVALID_PARAMS, f"params._meta is missing the required key(s): {', '.join(missing)}")
    if not isinstance(meta[META_CLIENT_CAPABILITIES], dict):
        raise JsonRpcError(INVALID_PARAMS, f"params._meta[{META_CLIENT_CAPABILITIES!r}] must be an object")
    _check_headers_match(request, meta, headers)
    version = meta[META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        raise JsonRpcError(INVALID_PARAMS, f"params._meta[{META_PROTOCOL_VERSION!r}] must be a string")
    if version not in STATELESS_VERSIONS:
        raise JsonRpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": all_supported_versions(), "requested": clip(version)},
        )


def _check_headers_match(request: Request, meta: dict[str, Any], headers: RoutingHeaders) -> None:
    header_version = headers.protocol_version[0].strip() if headers.protocol_version else None
    if header_version != meta[META_PROTOCOL_VERSION]:
        raise JsonRpcError(HEADER_MISMATCH, "the MCP-Protocol-Version header does not match params._meta's protocol version")
    if not headers.method:
        raise JsonRpcError(
            HEADER_MISMATCH, f"the Mcp-Method header is required (it must equal the body's method, {excerpt(request.method)})"
        )
    if headers.method[0].strip() != request.method:
        raise JsonRpcError(HEADER_MISMATCH, "the Mcp-Method header does not match the body's method")
    target_field = NAMED_TARGETS.get(request.method)
    if target_field is not None:
        if not headers.name:
            raise JsonRpcError(HEADER_MISMATCH, f"the Mcp-Name header is required for {request.method} (the {target_field!r} it targets)")
        if decode_header_value(headers.name[0]) != request.params.get(target_field):
            raise JsonRpcError(HEADER_MISMATCH, f"the Mcp-Name header does not match the body's {target_field!r} parameter")


def method_not_found(method: str) -> JsonRpcError:
    hint = " (removed by the stateless revision)" if method in REMOVED_METHODS else ""
    return JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {excerpt(method)}{hint}", {"method": clip(method)})


def finish_result(method: str, result: dict[str, Any], server_info: dict[str, str], list_ttl_ms: int) -> dict[str, Any]:
    """Every result says it is complete and who answered; cacheable ones say for how long and for whom."""
    out = {**result, "resultType": "complete"}
    out["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: server_info}
    if method in CACHEABLE_METHODS:
        # The same for every caller until the server itself changes: tool and list definitions are static.
        out["ttlMs"] = list_ttl_ms
        out["cacheScope"] = "public"
    return out


def http_status(answer: dict[str, Any] | None) -> int:
    """202 for nothing owed (a notification), else the status of the error code, else 200."""
    if answer is None:
        return 202
    error = answer.get("error")
    return HTTP_STATUS_FOR_CODE.get(error["code"], 200) if isinstance(error, dict) else 200
