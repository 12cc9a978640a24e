"""Systems to evaluate: the local model in-process, or any running MCP classifier over REST style."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from tqdm import tqdm

from ..classify.results import ClassificationResult
from .dataset import OUT_OF_SCOPE
from .metrics import Prediction

REMOTE_CONCURRENCY = 8  # a handful of requests in flight: fast, yet gentle on a production server


def predict_local(classify: Callable[[list[str]], list[ClassificationResult]], texts: Sequence[str], batch_size: int) -> list[Prediction]:
    """Run an in-process classifier (handed in by the caller: the CLI builds it) in batches, with progress."""
    out: list[Prediction] = []
    with tqdm(total=len(texts), desc="local", unit="q", file=sys.stderr, disable=None) as progress:
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start : start + batch_size])
            out += [
                Prediction(r.category if r.in_scope else OUT_OF_SCOPE, r.confidence, r.use_reasoning, tuple(r.labels))
                for r in classify(chunk)
            ]
            progress.update(len(chunk))
    return out


class RemoteError(RuntimeError):
    pass


def _tool_payload(result: dict[str, Any]) -> dict[str, Any]:
    """structuredContent when present, else the JSON text content (older servers send only that)."""
    if result.get("isError"):
        raise RemoteError(f"tool error: {result.get('content')}")
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    return json.loads(result["content"][0]["text"])


async def _predict_remote(url: str, texts: Sequence[str], timeout_s: float) -> list[Prediction]:
    base = url.rstrip("/").removesuffix("/mcp")
    async with httpx.AsyncClient(base_url=base, timeout=timeout_s) as client:

        async def call(arguments: dict[str, Any], name: str) -> dict[str, Any]:
            response = await client.post("/mcp/tools/call", json={"name": name, "arguments": arguments})
            if response.status_code != 200:
                raise RemoteError(f"{base}: HTTP {response.status_code}: {response.text[:200]}")
            return _tool_payload(response.json())

        categories = (await call({}, "list_categories"))["categories"]
        limit = asyncio.Semaphore(REMOTE_CONCURRENCY)
        progress = tqdm(total=len(texts), desc=base, unit="q", file=sys.stderr, disable=None)

        async def one(text: str) -> Prediction:
            async with limit:
                payload = await call({"text": text, "with_probabilities": True}, "classify_text")
            progress.update(1)
            category = payload.get("category") or categories[int(payload["class"])]
            if payload.get("in_scope") is False:
                category = OUT_OF_SCOPE
            return Prediction(category, float(payload["confidence"]), payload.get("use_reasoning"), tuple(payload.get("labels") or ()))

        try:
            return list(await asyncio.gather(*(one(t) for t in texts)))
        finally:
            progress.close()


def predict_remote(url: str, texts: Sequence[str], timeout_s: float = 60.0) -> list[Prediction]:
    return asyncio.run(_predict_remote(url, texts, timeout_s))
