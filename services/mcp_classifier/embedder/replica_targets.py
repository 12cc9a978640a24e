"""Where the embedder replicas' own gRPC servers listen (Serve direct ingress), read from Serve's target groups.

With direct ingress on, every replica of the ingress deployment serves gRPC on its own port and
Serve publishes the list as ``target_groups`` in its instance details: from the driver's Serve
client on the embedded node, from the Serve REST API (``/api/serve/applications/``) on a cluster.
While an application has no running replica, Serve lists its proxy there instead, so the list is
always somewhere a call can go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

SERVE_DETAILS_PATH = "/api/serve/applications/"
GRPC_PROTOCOL = "grpc"

TargetSource = Callable[[], Awaitable[list[str]]]


def grpc_targets(details: Mapping[str, Any], app_name: str) -> list[str]:
    """``ip:port`` of every gRPC target Serve lists for ``app_name``, sorted so a list compares by value."""
    found: set[str] = set()
    for group in details.get("target_groups") or []:
        protocol = str(getattr(group.get("protocol"), "value", group.get("protocol", ""))).lower()
        if protocol != GRPC_PROTOCOL or group.get("app_name", app_name) not in (app_name, ""):
            continue
        found.update(f"{target['ip']}:{int(target['port'])}" for target in group.get("targets") or [])
    return sorted(found)


def embedded_target_source(app_name: str) -> TargetSource:
    """The embedded node's targets, asked of Serve's controller through this process's driver connection."""

    def read() -> list[str]:
        from ray.serve.context import _get_global_client

        # Serve's client has no public call for the target groups; its instance details carry them,
        # the same document the REST API serves on a cluster.
        client = _get_global_client()
        if client is None:
            raise RuntimeError("Serve is not running in this process")
        return grpc_targets(client.get_serve_details(), app_name)

    async def targets() -> list[str]:
        return await asyncio.to_thread(read)

    return targets


def serve_api_target_source(base_url: str, app_name: str, timeout_s: float, token_file: Path | None = None) -> TargetSource:
    """A cluster's targets, from the Serve REST API on the Ray head (the dashboard port, 8265 by default).

    On a cluster with Ray's token authentication the API answers 401 without the token: ``token_file`` (a
    mounted Secret) is read on each listing, so a rotated token is picked up without a restart.
    """
    url = base_url.rstrip("/") + SERVE_DETAILS_PATH

    async def targets() -> list[str]:
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"} if token_file is not None else {}
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as client:
            response = await client.get(url)
            response.raise_for_status()
            return grpc_targets(response.json(), app_name)

    return targets
