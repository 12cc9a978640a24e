"""What `POST /mcp` answers for a body: one rule for the full app's route and for the door that opens first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..protocol import stateless
from ..protocol.dispatcher import McpDispatcher
from ..protocol.stateless import RoutingHeaders, is_stateless_request

ACCEPTED = 202  # notifications only: nothing to answer


async def answer_post(
    dispatcher: McpDispatcher, body: bytes, versions: Sequence[str], methods: Sequence[str], names: Sequence[str]
) -> tuple[int, Any | None]:
    """(HTTP status, JSON answer or None for an empty one). The first MCP-Protocol-Version header picks the era:
    the 2026-07-28 (stateless) rules, with the Mcp-Method and Mcp-Name routing headers, or the handshake era's."""
    if versions and is_stateless_request(versions[0]):
        answer = await dispatcher.handle_stateless_bytes(body, RoutingHeaders(tuple(versions), tuple(methods), tuple(names)))
        return stateless.http_status(answer), answer
    answer = await dispatcher.handle_bytes(body)
    return (ACCEPTED if answer is None else 200), answer
