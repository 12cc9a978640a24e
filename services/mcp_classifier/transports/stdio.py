"""stdio transport: newline-delimited JSON-RPC on stdin/stdout; logs go to stderr only."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import BinaryIO

import orjson

from ..protocol import correlation
from ..protocol.dispatcher import McpDispatcher

log = logging.getLogger(__name__)


async def serve_stdio(
    dispatcher: McpDispatcher,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    observer: correlation.DoorObserver | None = None,
) -> None:
    """Answer each line as it arrives; requests run concurrently so they batch together like HTTP ones.

    ``observer`` counts each line as a request on the stdio door, for a host process that keeps metrics."""
    reader = stdin or sys.stdin.buffer
    writer = stdout or sys.stdout.buffer
    write_lock = asyncio.Lock()
    pending: set[asyncio.Task[None]] = set()
    session_id = uuid.uuid4().hex  # one client per process: its log lines share this id

    async def answer(line: bytes) -> None:
        record = correlation.begin("stdio", session_id=session_id, observer=observer)  # each line runs in its own task, so its own record
        try:
            response = await dispatcher.handle_bytes(line)
        finally:
            correlation.finish(record)
        if response is None:
            return
        async with write_lock:
            writer.write(orjson.dumps(response) + b"\n")
            writer.flush()

    while True:
        # A thread read works for pipes, files and terminals alike (connect_read_pipe does not).
        line = await asyncio.to_thread(reader.readline)
        if not line:
            break
        if not line.strip():
            continue
        task = asyncio.create_task(answer(line))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
