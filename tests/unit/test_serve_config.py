"""`mcp-classifier serve-config`: the Serve config the Helm chart embeds, built from the same settings."""

from __future__ import annotations

import subprocess
import sys

import yaml

from mcp_classifier.embedder.serve_config import SERVICER_FUNCTION, serve_config
from mcp_classifier.settings import Settings


def test_serve_config_carries_batching_gpus_autoscaling_and_grpc_ingress() -> None:
    settings = Settings(
        batch_size=48, replica_num_gpus=1, min_replicas=2, max_replicas=6, max_ongoing_requests=16, model="Qwen/Qwen3-Embedding-0.6B"
    )
    config = serve_config(settings)
    assert config["grpc_options"]["grpc_servicer_functions"] == [SERVICER_FUNCTION]
    (app,) = config["applications"]
    (deployment,) = app["deployments"]
    assert deployment["ray_actor_options"]["num_gpus"] == 1
    assert deployment["max_ongoing_requests"] >= deployment["user_config"]["max_batch_size"] == 48
    assert deployment["autoscaling_config"]["min_replicas"] == 2 and deployment["autoscaling_config"]["max_replicas"] == 6
    # a crashed replica is found (and replaced) within the product's period, not Serve's default 10 s
    assert deployment["health_check_period_s"] == Settings().ray.replica_health_check_period_s == 2.0
    # the gateway logs each request; a replica's own line per call is opt-in
    assert deployment["logging_config"] == {"enable_access_log": False}
    (with_log,) = serve_config(Settings(replica_access_log=True))["applications"][0]["deployments"]
    assert with_log["logging_config"] == {"enable_access_log": True}
    assert app["args"]["settings"]["model"] == "Qwen/Qwen3-Embedding-0.6B"
    assert app["route_prefix"] == "/mcp-classifier"


def test_cli_prints_the_same_config_for_the_same_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "serve-config", "--replica-num-gpus", "1", "--max-replicas", "3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert yaml.safe_load(out) == serve_config(Settings(replica_num_gpus=1, max_replicas=3))


def test_embedded_ray_never_asks_for_more_cpu_replicas_than_its_cpus() -> None:
    from mcp_classifier.embedder.local_cluster import fit_replicas_to_node

    fitted = fit_replicas_to_node(Settings(ray_num_cpus=1, replica_num_cpus=1, min_replicas=2, max_replicas=3).ray)
    assert (fitted.min_replicas, fitted.max_replicas) == (1, 1)
    untouched = Settings(ray_num_cpus=4, replica_num_cpus=1, min_replicas=2, max_replicas=3).ray
    assert fit_replicas_to_node(untouched) == untouched
    gpu = Settings(ray_num_cpus=1, replica_num_gpus=1, min_replicas=2, max_replicas=2).ray
    assert fit_replicas_to_node(gpu) == gpu  # GPU replicas are placed by GPUs, not CPUs
