"""SIGTERM during load: /ready turns 503 at once, every request the gateway accepted completes with 200,
new ones are answered during the drain and refused at connect afterwards, and the process exits in time.

A real gateway process (local backend, the real model) under 8 client threads that, unlike a load
balancer, never stop sending. Each request opens its own connection. Everything sent before the
drain ends must get a 200. After it, the listener closes: a request is refused at connect, or, if
its connection raced into the closing listener's backlog (or was accepted but not yet read), it is
reset before any answer. Either way the gateway never started it, so nothing it had accepted is lost.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx

from tests.support.processes import start_server

DRAIN_DELAY_S = 2.0
SHUTDOWN_TIMEOUT_S = 10.0
CLIENTS = 8
# How httpx reports a connection the closing listener reset before answering: a FIN before the
# response (RemoteProtocolError), or an RST seen while sending (WriteError) or reading (ReadError).
RESET_UNANSWERED = {"RemoteProtocolError", "ReadError", "WriteError"}
CLOSE_MARGIN_S = 0.25  # a request sent this close to the listener closing may already race with it
BODY = {"name": "classify_text", "arguments": {"text": "how do I reverse a linked list in python"}}


def test_sigterm_drains_without_losing_a_request(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--no-cache", "--drain-delay-s", str(DRAIN_DELAY_S), "--shutdown-timeout-s", str(SHUTDOWN_TIMEOUT_S))
    outcomes: list[tuple[float, float, str]] = []  # (sent, ended, "200" / other status / the exception's class)
    stop = threading.Event()
    lock = threading.Lock()

    def client() -> None:
        while not stop.is_set():
            sent = time.monotonic()
            try:
                with httpx.Client(timeout=30) as http:  # a fresh connection per request
                    outcome = str(http.post(server.url + "/mcp/tools/call", json=BODY).status_code)
            except httpx.ConnectError:
                outcome = "refused"
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            with lock:
                outcomes.append((sent, time.monotonic(), outcome))
            if outcome == "refused":
                time.sleep(0.05)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(2.0)  # under load
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with httpx.Client(timeout=5) as probe:
            ready = probe.get(server.url + "/ready")
        ready_after_s = time.monotonic() - signalled
        exit_code = server.process.wait(timeout=DRAIN_DELAY_S + SHUTDOWN_TIMEOUT_S + 5)
        exited_after_s = time.monotonic() - signalled
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        server.stop()

    assert ready.status_code == 503 and ready.json() == {"ready": False, "draining": True}, ready.text
    assert ready_after_s < 1.0
    assert exit_code == 0 and exited_after_s < DRAIN_DELAY_S + SHUTDOWN_TIMEOUT_S, (exit_code, exited_after_s)
    drain_ends = signalled + DRAIN_DELAY_S - CLOSE_MARGIN_S
    # A request counts from when it was sent; a refusal or reset from when it happened, since on a busy host a
    # client thread can be sent well before the drain ends yet reach the listener only after it closed.
    before, after = [], []
    for sent, ended, outcome in outcomes:
        happened = ended if outcome in {"refused", *RESET_UNANSWERED} else sent
        (before if happened < drain_ends else after).append(outcome)
    assert set(before) == {"200"}, sorted(set(before))  # everything sent while serving or draining: answered
    assert set(after) <= {"200", "refused", *RESET_UNANSWERED}, sorted(set(after))  # then refused or reset unanswered
    answered_while_draining = sum(1 for sent, ended, outcome in outcomes if outcome == "200" and ended > signalled)
    assert answered_while_draining >= CLIENTS, answered_while_draining  # the drain kept answering
    assert "refused" in after
    print(
        f"SIGTERM under {CLIENTS} clients: {before.count('200') + after.count('200')} answered 200 "
        f"({answered_while_draining} after the signal), {after.count('refused')} refused at connect and "
        f"{sum(after.count(reset) for reset in RESET_UNANSWERED)} reset unanswered after the listener closed, 0 failed; "
        f"/ready 503 after {ready_after_s * 1000:.0f} ms; exit 0 after {exited_after_s:.1f} s"
    )
