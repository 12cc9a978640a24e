"""Locust workload for mcp-classifier: router-style queries over both MCP styles, every answer validated.

Self-contained on purpose (locust and the standard library only): the same file runs from
`mcp-classifier loadtest`, from `locust -f` by hand, and from a ConfigMap in the locustio/locust
image on Kubernetes, where this package is not installed.

Knobs (environment variables; `mcp-classifier loadtest` sets them from its flags):
  MCP_LOADTEST_HIT_RATIO            share of requests that reuse a warmed-up text (cache hits)   [0.0]
  MCP_LOADTEST_PROBABILITIES_RATIO  share of classify calls with with_probabilities=true         [0.5]
  MCP_LOADTEST_LENGTH_MIX           text-length mix, e.g. "short:0.4,medium:0.4,long:0.2"         [that]
  MCP_LOADTEST_REPEAT_POOL          how many distinct texts the repeated share cycles through     [50]
  MCP_LOADTEST_BATCH_TEXTS          texts per classify_batch call                                  [8]
  MCP_LOADTEST_API_KEY              bearer key, when the gateway has keys
  MCP_LOADTEST_SHAPE                "steps": each user count of MCP_LOADTEST_STEPS held and measured on its own;
                                    "stages": ramp, plateau, spike, plateau; unset: Locust's own -u/-r/-t
  MCP_LOADTEST_STEPS, MCP_LOADTEST_STEP_S       the steps' user counts ("1,2,4,8") and seconds per step   [20]
  MCP_LOADTEST_SPAWN_RATE           users started per second within a step; 0: all at once          [0]
  MCP_LOADTEST_SLO_P99_MS           the p99 a step must stay within to count as capacity            [100]
  MCP_LOADTEST_MAX_FAILURE_RATIO    failures a step may have and still count as capacity           [0]
  MCP_LOADTEST_WARMUP_TIMEOUT_S     the cache warm-up's own budget, before any step starts          [120]
  MCP_LOADTEST_USERS, MCP_LOADTEST_DURATION_S   the stages' plateau users and total length
With "steps", every step is logged as a "[loadtest] step" line and the run ends with a "[loadtest] capacity"
line: the highest throughput whose p99 stays within the SLO. A warm-up that fails or overruns its budget ends
the run before any step.
Tags: jsonrpc, rest (the two styles), classify, batch, list. Request names end in "(repeat)" or
"(unique)", so cache-hit and miss latency are reported apart.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import time
import urllib.request
from typing import Any

from locust import FastHttpUser, LoadTestShape, events, tag, task
from locust.exception import CatchResponseError, StopUser
from locust.stats import calculate_response_time_percentile, diff_response_time_dicts

# ---- the query set: router traffic of mixed length (short chat, one-line questions, long asks) -------
SHORT = [
    "what is 17 times 23",
    "define entropy",
    "hi there",
    "capital of peru",
    "is 97 prime",
    "who was cleopatra",
    "python list comprehension",
    "what is dns",
    "thanks a lot",
    "speed of light",
    "derivative of sin x",
    "what is a mutex",
    "when did ww2 end",
    "good morning",
    "what causes rain",
    "explain tcp",
]
MEDIUM = [
    "How do I reverse a linked list in place without using extra memory?",
    "What were the main causes of the collapse of the Western Roman Empire?",
    "Can you explain how photosynthesis converts light into chemical energy?",
    "What is the difference between a process and a thread in an operating system?",
    "Solve the equation 3x squared minus 12 equals zero and show each step.",
    "Why did the Berlin Wall fall in 1989 and what happened right after?",
    "How does a vaccine train the immune system to recognise a virus?",
    "What should I cook for dinner tonight if I only have rice, eggs and spinach?",
    "How do index funds differ from actively managed mutual funds?",
    "Explain the Pythagorean theorem with a simple example.",
    "What is the role of mitochondria in a eukaryotic cell?",
    "How can I configure nginx as a reverse proxy for two backend services?",
]
LONG = [
    "I am preparing for an exam on linear algebra and I keep confusing eigenvalues and singular values. Could you "
    "explain both concepts, how they relate for symmetric matrices, and walk me through computing them for a small "
    "two by two example so that I can check my own work afterwards?",
    "Our team runs a Kubernetes cluster with a few dozen microservices and we see intermittent timeouts between "
    "services during deploys. What are the usual causes, such as readiness probes, connection draining and DNS "
    "caching, and how would you investigate them step by step?",
    "Write a short overview of the industrial revolution in Britain: what started it, how steam power and textile "
    "mills changed work and cities, and what the social consequences were for the working class during the period.",
    "My grandmother asked me how black holes form and whether anything can escape them. Explain stellar collapse, "
    "the event horizon and Hawking radiation in plain words, with an analogy she could follow over a cup of tea.",
    "Compare recursion and iteration for computing Fibonacci numbers in terms of time complexity, memory use and "
    "readability, then show how memoisation changes the picture and when you would pick each approach in practice.",
]
POOLS = {"short": SHORT, "medium": MEDIUM, "long": LONG}


def _env_float(name: str, default: float) -> float:
    value = float(os.environ.get(name, default))
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0 and 1, got {value}")
    return value


def _length_mix(spec: str) -> tuple[list[str], list[float]]:
    names, weights = [], []
    for part in spec.split(","):
        name, _, weight = part.partition(":")
        if name.strip() not in POOLS:
            raise ValueError(f"MCP_LOADTEST_LENGTH_MIX: unknown length {name!r}; use {sorted(POOLS)}")
        names.append(name.strip())
        weights.append(float(weight or 1))
    return names, weights


HIT_RATIO = _env_float("MCP_LOADTEST_HIT_RATIO", 0.0)
PROBABILITIES_RATIO = _env_float("MCP_LOADTEST_PROBABILITIES_RATIO", 0.5)
LENGTHS, LENGTH_WEIGHTS = _length_mix(os.environ.get("MCP_LOADTEST_LENGTH_MIX", "short:0.4,medium:0.4,long:0.2"))
REPEAT_POOL_SIZE = int(os.environ.get("MCP_LOADTEST_REPEAT_POOL", "50"))
BATCH_TEXTS = int(os.environ.get("MCP_LOADTEST_BATCH_TEXTS", "8"))
API_KEY = os.environ.get("MCP_LOADTEST_API_KEY", "")
SHAPE = os.environ.get("MCP_LOADTEST_SHAPE", "")
STEPS = [int(users) for users in os.environ.get("MCP_LOADTEST_STEPS", "").split(",") if users.strip()] if SHAPE == "steps" else []
STEP_S = float(os.environ.get("MCP_LOADTEST_STEP_S", "20"))
SPAWN_RATE = float(os.environ.get("MCP_LOADTEST_SPAWN_RATE", "0"))
SLO_P99_MS = float(os.environ.get("MCP_LOADTEST_SLO_P99_MS", "100"))
MAX_FAILURE_RATIO = _env_float("MCP_LOADTEST_MAX_FAILURE_RATIO", 0.0)
WARMUP_TIMEOUT_S = float(os.environ.get("MCP_LOADTEST_WARMUP_TIMEOUT_S", "120"))
PERCENTILES = (0.5, 0.95, 0.99)
if SHAPE == "steps" and not STEPS:
    raise ValueError("MCP_LOADTEST_SHAPE=steps needs MCP_LOADTEST_STEPS, e.g. 1,2,4,8")
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"} | ({"Authorization": f"Bearer {API_KEY}"} if API_KEY else {})

_unique_counter = itertools.count()
_rng = random.Random(20261123)  # the repeated pool is the same in every process, so warm-up covers it
_live = random.Random()  # seeded from the OS: unique texts differ between worker processes


def _pick_text(rng: random.Random) -> str:
    (length,) = rng.choices(LENGTHS, LENGTH_WEIGHTS)
    return rng.choice(POOLS[length])


REPEATED = [f"{_pick_text(_rng)} (variant {i})" for i in range(REPEAT_POOL_SIZE)]


def unique_text() -> str:
    """A text never sent before: a pool query plus a counter and a random tag (unique across processes)."""
    return f"{_pick_text(_live)} [q{next(_unique_counter)}-{_live.getrandbits(32):08x}]"


# ---- validation: the protocol's rules (docs/protocol.md); a wrong answer is a failure, not a success ------------
class InvalidAnswer(Exception):
    pass


# classify/scope_stats.py's IN_SCOPE_PROBABILITY: an answer is in scope from this P(in scope) up (not imported: this file
# runs where the package is not installed).
MIN_IN_SCOPE_P = 0.5
PROBABILITY_SLACK = 1e-6  # float rounding between the server's product and its JSON


def check_classification(result: Any, n_categories: int, with_probabilities: bool) -> None:
    if not isinstance(result, dict):
        raise InvalidAnswer(f"classification is not an object: {result!r}")
    cls, confidence = result.get("class"), result.get("confidence")
    if not isinstance(cls, int) or isinstance(cls, bool) or not 0 <= cls < n_categories:
        raise InvalidAnswer(f"class {cls!r} outside 0..{n_categories - 1}")
    if not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0:
        raise InvalidAnswer(f"confidence {confidence!r} outside [0, 1]")
    if not isinstance(result.get("model"), str) or not result["model"]:
        raise InvalidAnswer("model is missing")
    if not isinstance(result.get("use_reasoning"), bool):
        raise InvalidAnswer("use_reasoning is not a boolean")
    if with_probabilities:
        probabilities = result.get("probabilities")
        if not isinstance(probabilities, list) or len(probabilities) != n_categories:
            raise InvalidAnswer(f"expected {n_categories} probabilities, got {probabilities!r}")
        if any(not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 for p in probabilities):
            raise InvalidAnswer("a probability is outside [0, 1]")
        if abs(sum(probabilities) - 1.0) > 0.01:
            raise InvalidAnswer(f"probabilities sum to {sum(probabilities):.4f}, not 1")
        check_confidence(cls, confidence, probabilities, in_scope=result.get("in_scope", True) is not False)
        entropy = result.get("entropy")
        if not isinstance(entropy, (int, float)) or entropy < 0 or entropy > math.log(n_categories) + 1e-6:
            raise InvalidAnswer(f"entropy {entropy!r} outside [0, ln {n_categories}]")


def check_confidence(cls: int, confidence: float, probabilities: list[float], *, in_scope: bool) -> None:
    """Confidence is the class's probability times P(in scope) times P(the language is served) (classify/classifier.py).

    So it is never above the top probability. An answer in scope has P(in scope) of at least MIN_IN_SCOPE_P and a served
    language, so its confidence is at least that share of the top probability; one out of scope may be as low as 0.
    """
    top = max(probabilities)
    if probabilities[cls] < top - PROBABILITY_SLACK:
        raise InvalidAnswer(f"class {cls} has probability {probabilities[cls]}, not the top one {top}")
    if confidence > top + PROBABILITY_SLACK:
        raise InvalidAnswer(f"confidence {confidence} is above the top probability {top}")
    if in_scope and confidence < top * MIN_IN_SCOPE_P - PROBABILITY_SLACK:
        raise InvalidAnswer(
            f"confidence {confidence} of an answer in scope is below {MIN_IN_SCOPE_P:g} x the top probability {top} "
            "(the least P(in scope) an answer in scope has)"
        )


def tool_payload(call_result: Any) -> dict[str, Any]:
    """The JSON a tools/call result carries: structuredContent, else the text content."""
    if not isinstance(call_result, dict) or call_result.get("isError") is not False:
        raise InvalidAnswer(f"tool call failed: {str(call_result)[:200]}")
    if isinstance(call_result.get("structuredContent"), dict):
        return call_result["structuredContent"]
    return json.loads(call_result["content"][0]["text"])


# ---- the users ---------------------------------------------------------------------------------------------
class _ClassifierUser(FastHttpUser):
    abstract = True
    style = ""
    n_categories = 0

    def on_start(self) -> None:
        if WARM_UP.failed:  # the run ends at the shape's next tick: send nothing meanwhile
            raise StopUser()
        with self.client.post(**self.request("list_categories", {}), name=f"{self.style} list_categories", catch_response=True) as response:
            try:
                self.n_categories = len(tool_payload(self.result(response))["categories"])
                response.success()
            except (InvalidAnswer, ValueError, KeyError, TypeError) as exc:
                response.failure(f"list_categories: {exc}")

    def request(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def result(self, response: Any) -> Any:
        raise NotImplementedError

    def classify_text(self) -> None:
        repeat = random.random() < HIT_RATIO
        text = random.choice(REPEATED) if repeat else unique_text()
        with_probabilities = random.random() < PROBABILITIES_RATIO
        name = f"{self.style} classify_text ({'repeat' if repeat else 'unique'})"
        arguments = {"text": text, "with_probabilities": with_probabilities}
        with self.client.post(**self.request("classify_text", arguments), name=name, catch_response=True) as response:
            try:
                check_classification(tool_payload(self.result(response)), self.n_categories, with_probabilities)
                response.success()
            except (InvalidAnswer, ValueError, KeyError, TypeError) as exc:
                response.failure(str(exc))

    def classify_batch(self) -> None:
        """Several texts in one call (repeats and unique ones mixed): every item validated."""
        texts = [random.choice(REPEATED) if random.random() < HIT_RATIO else unique_text() for _ in range(BATCH_TEXTS)]
        with_probabilities = random.random() < PROBABILITIES_RATIO
        arguments = {"texts": texts, "with_probabilities": with_probabilities}
        with self.client.post(
            **self.request("classify_batch", arguments), name=f"{self.style} classify_batch", catch_response=True
        ) as response:
            try:
                payload = tool_payload(self.result(response))
                if len(payload["results"]) != len(texts) or payload["failed"]:
                    raise InvalidAnswer(f"expected {len(texts)} results and no failed item: {str(payload)[:200]}")
                for item in payload["results"]:
                    check_classification(item, self.n_categories, with_probabilities)
                response.success()
            except (InvalidAnswer, ValueError, KeyError, TypeError) as exc:
                response.failure(str(exc))

    def list_categories(self) -> None:
        with self.client.post(**self.request("list_categories", {}), name=f"{self.style} list_categories", catch_response=True) as response:
            try:
                if len(tool_payload(self.result(response))["categories"]) != self.n_categories:
                    raise InvalidAnswer("the category count changed")
                response.success()
            except (InvalidAnswer, ValueError, KeyError, TypeError) as exc:
                response.failure(str(exc))


class JsonRpcUser(_ClassifierUser):
    """MCP Streamable HTTP, stateless: JSON-RPC on POST /mcp."""

    style = "jsonrpc"
    _ids = itertools.count(1)

    @tag("jsonrpc", "classify")
    @task(20)
    def jsonrpc_classify_text(self) -> None:
        self.classify_text()

    @tag("jsonrpc", "list")
    @task(1)
    def jsonrpc_list_categories(self) -> None:
        self.list_categories()

    @tag("jsonrpc", "batch")
    @task(1)
    def jsonrpc_classify_batch(self) -> None:
        self.classify_batch()

    def request(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._last_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": self._last_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        return {"url": "/mcp", "data": json.dumps(body), "headers": HEADERS}

    def result(self, response: Any) -> Any:
        if response.status_code != 200:
            raise InvalidAnswer(f"HTTP {response.status_code}: {response.text[:200]}")
        body = response.json()
        if body.get("jsonrpc") != "2.0" or body.get("id") != self._last_id or "result" not in body:
            raise InvalidAnswer(f"bad JSON-RPC answer: {str(body)[:200]}")
        return body["result"]


class RestUser(_ClassifierUser):
    """REST style: POST /mcp/tools/call with the params object as the body (the vLLM Semantic Router's client)."""

    style = "rest"

    @tag("rest", "classify")
    @task(20)
    def rest_classify_text(self) -> None:
        self.classify_text()

    @tag("rest", "list")
    @task(1)
    def rest_list_categories(self) -> None:
        self.list_categories()

    @tag("rest", "batch")
    @task(1)
    def rest_classify_batch(self) -> None:
        self.classify_batch()

    def request(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"url": "/mcp/tools/call", "data": json.dumps({"name": tool, "arguments": arguments}), "headers": HEADERS}

    def result(self, response: Any) -> Any:
        if response.status_code != 200:
            raise InvalidAnswer(f"HTTP {response.status_code}: {response.text[:200]}")
        return response.json()


# ---- warm-up: every repeated text once, before the clock starts, so "(repeat)" means a cache hit --------
class WarmUp:
    """The warm-up's own budget and outcome: it is not part of any measured step, and a failed one ends the run."""

    def __init__(self) -> None:
        self.texts = 0  # requests the warm-up needs (every repeated text, with and without probabilities)
        self.done = 0
        self.seconds = 0.0
        self.failed: str | None = None
        self.finished = False  # Locust fires test_start in its spawning greenlet: the shapes wait for this

    def as_dict(self) -> dict[str, Any]:
        return {"texts": self.texts, "done": self.done, "seconds": round(self.seconds, 2), "timeout_s": WARMUP_TIMEOUT_S,
                "failed": self.failed}  # fmt: skip


WARM_UP = WarmUp()


@events.test_start.add_listener
def warm_up_repeated_texts(environment: Any, **_: Any) -> None:
    try:
        if HIT_RATIO > 0 and environment.host is not None and type(environment.runner).__name__ != "WorkerRunner":
            _warm_up(environment.host)
    finally:
        WARM_UP.finished = True
    if environment.shape_class is not None:
        environment.shape_class.reset_time()  # the measured steps start now (or, after a failed warm-up, never)


def _warm_up(host: str) -> None:
    url = host.rstrip("/") + "/mcp/tools/call"
    jobs = [(text, with_probabilities) for text in REPEATED for with_probabilities in (False, True)]
    WARM_UP.texts = len(jobs)
    print(f"[loadtest] warm-up: {len(jobs)} requests, budget {WARMUP_TIMEOUT_S:g} s (not timed)", flush=True)
    started = time.monotonic()
    deadline = started + WARMUP_TIMEOUT_S
    for text, with_probabilities in jobs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            WARM_UP.failed = f"the cache warm-up did not finish within {WARMUP_TIMEOUT_S:g} s ({WARM_UP.done} of {len(jobs)} requests done)"
            break
        body = json.dumps({"name": "classify_text", "arguments": {"text": text, "with_probabilities": with_probabilities}})
        request = urllib.request.Request(url, data=body.encode(), headers=HEADERS, method="POST")
        try:
            urllib.request.urlopen(request, timeout=remaining).read()
        except TimeoutError:  # the budget ran out mid-request
            WARM_UP.failed = f"the cache warm-up did not finish within {WARMUP_TIMEOUT_S:g} s ({WARM_UP.done} of {len(jobs)} requests done)"
            break
        except OSError as exc:  # an HTTP error or a refused connection
            WARM_UP.failed = f"the cache warm-up failed after {WARM_UP.done} of {len(jobs)} requests: {exc}"
            break
        WARM_UP.done += 1
    WARM_UP.seconds = time.monotonic() - started
    print(f"[loadtest] warm-up: {WARM_UP.failed or f'{WARM_UP.done} requests in {WARM_UP.seconds:.1f} s'}", flush=True)


# ---- per-step figures from Locust's own cumulative stats: the difference of two snapshots ------------------
def request_kind(name: str) -> str:
    """hit (a repeated, warmed-up text), miss (a unique text), batch or list: what a request costs the server."""
    if name.endswith("(repeat)"):
        return "hit"
    if name.endswith("(unique)"):
        return "miss"
    return "batch" if "classify_batch" in name else "list"


KINDS = ("hit", "miss", "batch", "list")
Snapshot = dict[str, tuple[int, int, dict[int, int]]]  # request name -> (requests, failures, response-time histogram)


def snapshot(stats: Any) -> Snapshot:
    return {e.name: (e.num_requests, e.num_failures, dict(e.response_times)) for e in stats.entries.values()}


def figures(requests: int, failures: int, histogram: dict[int, int], seconds: float) -> dict[str, Any]:
    """Counts, rate and percentiles of one step, with Locust's own percentile function over its histogram."""
    out: dict[str, Any] = {"requests": requests, "failures": failures, "rps": round(requests / seconds, 2) if seconds > 0 else 0.0}
    for q in PERCENTILES:
        out[f"p{round(q * 100)}"] = calculate_response_time_percentile(histogram, requests, q) if requests else None
    return out


def step_figures(users: int, before: Snapshot, after: Snapshot, seconds: float) -> dict[str, Any]:
    counts = {kind: [0, 0] for kind in ("all", *KINDS)}  # requests, failures
    histograms: dict[str, dict[int, int]] = {kind: {} for kind in counts}
    for name, (requests, failures, times) in after.items():
        old_requests, old_failures, old_times = before.get(name, (0, 0, {}))
        delta = diff_response_time_dicts(times, old_times)
        for kind in ("all", request_kind(name)):
            counts[kind][0] += requests - old_requests
            counts[kind][1] += failures - old_failures
            for bucket, count in delta.items():
                histograms[kind][bucket] = histograms[kind].get(bucket, 0) + count

    def of(kind: str) -> dict[str, Any]:
        return figures(counts[kind][0], counts[kind][1], histograms[kind], seconds)

    step = {"users": users, "seconds": round(seconds, 2), **of("all")}
    step["kinds"] = {kind: of(kind) for kind in KINDS if counts[kind][0]}
    step["within_slo"] = within_slo(step)
    return step


def within_slo(step: dict[str, Any]) -> bool:
    return bool(step["requests"]) and step["p99"] <= SLO_P99_MS and step["failures"] <= MAX_FAILURE_RATIO * step["requests"]


class StepRecorder:
    """Marks the start of each step and, at its end, keeps what Locust counted in between."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self._open: tuple[int, int, float, Snapshot] | None = None  # (index, users, start, snapshot)

    def restart(self, stats: Any) -> None:
        self.steps, self._open = [], None
        if STEPS and not WARM_UP.failed:
            self._open = (0, STEPS[0], time.monotonic(), snapshot(stats))

    @property
    def index(self) -> int | None:
        return None if self._open is None else self._open[0]

    def begin(self, index: int, stats: Any) -> None:
        self._open = (index, STEPS[index], time.monotonic(), snapshot(stats))

    def end(self, stats: Any, *, complete: bool = True) -> None:
        if self._open is None:
            return
        index, users, started, before = self._open
        self._open = None
        step = step_figures(users, before, snapshot(stats), time.monotonic() - started) | {"complete": complete}
        self.steps.append(step)
        p = {q: "—" if step[q] is None else step[q] for q in ("p50", "p95", "p99")}
        print(
            f"[loadtest] step {index + 1}/{len(STEPS)} users {users} | {step['seconds']:.0f} s | {step['requests']} requests "
            f"{step['failures']} failed | {step['rps']:.1f} req/s | p50 {p['p50']} p95 {p['p95']} p99 {p['p99']} ms "
            f"| {'within' if step['within_slo'] else 'over'} the p99 SLO of {SLO_P99_MS:g} ms",
            flush=True,
        )


RECORDER = StepRecorder()


def knee(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The step with the highest throughput whose p99 (and failures) stay within the SLO: the capacity."""
    inside = [s for s in steps if s["within_slo"] and s["complete"]]
    return max(inside, key=lambda s: s["rps"]) if inside else None


if SHAPE == "steps":

    class CapacitySteps(LoadTestShape):
        """Each user count of MCP_LOADTEST_STEPS held for MCP_LOADTEST_STEP_S seconds, measured on its own."""

        def reset_time(self) -> None:
            super().reset_time()
            if self.runner is not None:
                RECORDER.restart(self.runner.stats)

        def tick(self) -> tuple[int, float] | None:
            assert self.runner is not None
            if WARM_UP.failed:
                return None
            if not WARM_UP.finished:  # the same tick as the first: Locust starts nothing new meanwhile
                return STEPS[0], SPAWN_RATE or float(STEPS[0])
            index = int(self.get_run_time() // STEP_S)
            if index != RECORDER.index:
                RECORDER.end(self.runner.stats)
                if index < len(STEPS):
                    RECORDER.begin(index, self.runner.stats)
            if index >= len(STEPS):
                return None
            users = STEPS[index]
            return users, SPAWN_RATE or float(users)


# ---- optional stages: ramp, plateau, spike, plateau -----------------------------------------------------
if SHAPE == "stages":

    class RampPlateauSpike(LoadTestShape):
        """A quarter ramping to the plateau, a plateau, a spike to twice the users, back to the plateau."""

        users = int(os.environ.get("MCP_LOADTEST_USERS", "16"))
        duration_s = float(os.environ.get("MCP_LOADTEST_DURATION_S", "60"))

        def tick(self) -> tuple[int, float] | None:
            if WARM_UP.failed:
                return None
            if not WARM_UP.finished:
                return 1, float(self.users)  # the ramp's first tick
            t = self.get_run_time()
            if t >= self.duration_s:
                return None
            share = t / self.duration_s
            if share < 0.25:  # ramp
                return max(1, math.ceil(self.users * share / 0.25)), float(self.users)
            if 0.6 <= share < 0.75:  # spike
                return self.users * 2, float(self.users * 2)
            return self.users, float(self.users)


# ---- Locust's own final figures, for the runner's report (written where the stats live: never on a worker) --
@events.test_stop.add_listener
def write_summary(environment: Any, **_: Any) -> None:
    if type(environment.runner).__name__ == "WorkerRunner":
        return
    RECORDER.end(environment.stats, complete=False)  # a step cut short (--run-time, Ctrl-C): kept, marked
    best = knee(RECORDER.steps)
    if STEPS:
        print(f"[loadtest] capacity: {describe_knee(best)}", flush=True)
    path = os.environ.get("MCP_LOADTEST_SUMMARY_FILE")
    if not path:
        return

    def final(entry: Any) -> dict[str, Any]:
        out = entry.to_dict()
        out.update({f"p{round(q * 100)}": entry.get_response_time_percentile(q) for q in PERCENTILES})
        return out

    stats = environment.stats
    summary = {
        "entries": [final(e) for e in stats.entries.values()],
        "total": final(stats.total),
        "steps": RECORDER.steps,
        "knee": best,
        "warm_up": WARM_UP.as_dict(),
        "failures": failures(stats),
        "slo_p99_ms": SLO_P99_MS,
        "max_failure_ratio": MAX_FAILURE_RATIO,
    }
    with open(path, "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=2)


def failures(stats: Any) -> list[dict[str, Any]]:
    """Locust's failures by request name and reason, as its failures CSV has them but with the checks' own words."""
    rows = [
        {"method": e.method, "name": e.name, "error": failure_text(e.error), "occurrences": e.occurrences} for e in stats.errors.values()
    ]
    return sorted(rows, key=lambda row: -row["occurrences"])


def failure_text(error: Any) -> str:
    """A failure's reason without Locust's wrapper: the message a check gave, or the exception Locust caught."""
    if isinstance(error, CatchResponseError) and error.args:
        return str(error.args[0])
    text = str(error) if isinstance(error, str) else repr(error)
    if text.startswith("CatchResponseError(") and text.endswith(")"):  # from a worker: already a string
        text = text.removeprefix("CatchResponseError(").removesuffix(")").strip("'\"")
    return text


def describe_knee(best: dict[str, Any] | None) -> str:
    if best is None:
        return f"no step kept p99 within {SLO_P99_MS:g} ms without failures"
    kinds = ", ".join(f"{k} {v['rps']:.1f} req/s p99 {v['p99']} ms" for k, v in best["kinds"].items() if k in ("hit", "miss"))
    return f"{best['rps']:.1f} req/s at {best['users']} users, p99 {best['p99']} ms <= {SLO_P99_MS:g} ms ({kinds})"
