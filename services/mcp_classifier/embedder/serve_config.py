"""Settings -> the Serve config (the file the Helm chart puts in the RayService's serveConfigV2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..settings import BatchingSettings, RaySettings, Settings, settings_fields
from ..util.omp import omp_env

SERVICER_FUNCTION = "mcp_classifier.api.v1.classifier_pb2_grpc.add_ClassifierServicer_to_server"
IMPORT_PATH = "mcp_classifier.embedder.deployment:build_app"
DEPLOYMENT_NAME = "Embedder"

# Settings the replica itself needs to load the model and build the index, by flat name: the Serve config's
# args carry them flat, as the chart writes them.
REPLICA_SETTINGS = (
    "model",
    "model_revision",
    "device",
    "dtype",
    "pooling",
    "query_instruction",
    "max_seq_length",
    "torch_threads",
    "replica_cpu_pinning",
    "tokenizer_threads",
    "forward_overhead_tokens",
    "pack_width_tokens",
    "cuda_graphs",
    "fused_norms",
    "fp16_weights_max_tokens",
    "fused_rotary",
    "compiled_layers",
    "batch_size",
    "categories_file",
    "classifiers",
    "scoring_method",
    "middle_layer_features",
    "lexical_scoring",
    "token_matching",
    "scope_background",
    "second_labels",
    "served_languages",
    "language_min_confidence",
)


def route_prefix(ray: RaySettings) -> str:
    """Serve's gRPC proxy only routes to applications that have a route prefix."""
    return f"/{ray.serve_app_name}"


def replica_settings(settings: Settings) -> dict[str, Any]:
    """Only the fields that differ from the defaults, so the config stays short and readable."""
    out = {}
    fields = settings_fields()
    for name in REPLICA_SETTINGS:
        value = settings.value(name)
        if value != fields[name].default:
            out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """Paths as strings (a file's or each named classifier's): the Serve config is YAML/JSON, read back by Settings."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def user_config(batching: BatchingSettings) -> dict[str, Any]:
    """Knobs a replica applies in reconfigure(), so they change without a restart."""
    return {
        "max_batch_size": batching.batch_size,
        "batch_wait_timeout_s": batching.batch_window_ms / 1000.0,
        "batch_slot_chars": batching.batch_slot_chars,
    }


def deployment_options(ray: RaySettings, batching: BatchingSettings) -> dict[str, Any]:
    return {
        "name": DEPLOYMENT_NAME,
        "max_ongoing_requests": max(ray.max_ongoing_requests, batching.batch_size),
        "ray_actor_options": {"num_cpus": ray.replica_num_cpus, "num_gpus": ray.replica_num_gpus},
        "health_check_period_s": ray.replica_health_check_period_s,
        "logging_config": {"enable_access_log": ray.replica_access_log},
        "autoscaling_config": {
            "min_replicas": ray.min_replicas,
            "max_replicas": max(ray.max_replicas, ray.min_replicas),
            "target_ongoing_requests": ray.target_ongoing_requests,
        },
        "user_config": user_config(batching),
    }


def serve_config(settings: Settings) -> dict[str, Any]:
    return {
        "proxy_location": "EveryNode",
        "grpc_options": {"port": settings.ray.serve_grpc_port, "grpc_servicer_functions": [SERVICER_FUNCTION]},
        "applications": [
            {
                "name": settings.ray.serve_app_name,
                "route_prefix": route_prefix(settings.ray),
                "import_path": IMPORT_PATH,
                # The replicas import torch in Ray's workers, whose environment the cluster gives them.
                "runtime_env": {"env_vars": omp_env(settings.engine.omp_wait_policy, settings.engine.omp_spin_count)},
                "args": {"settings": replica_settings(settings)},
                "deployments": [deployment_options(settings.ray, settings.batching)],
            }
        ],
    }
