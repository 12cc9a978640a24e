"""/health's ``embedder`` reads the backend the settings chose through what its builder handed back, typed:
local, a gRPC address, or the embedded Ray before and after its client exists."""

from __future__ import annotations

from mcp_classifier.embedder.embedded_backend import EmbeddedRayBackend
from mcp_classifier.settings import Settings
from mcp_classifier.wiring import EmbedderRoute, build_backend

NOWHERE = {"direct_ingress": False, "addresses": [], "calls_in_flight": {}}


def test_the_local_backend_says_only_that_it_is_local() -> None:
    built = build_backend(Settings(backend="local"))
    assert built.kind == "local" and built.grpc_client() is None
    assert EmbedderRoute(built).health() == {"embedder": {"backend": "local"}}


def test_a_grpc_address_is_described_by_its_client() -> None:
    built = build_backend(Settings(backend="grpc://127.0.0.1:9"))
    assert built.kind == "grpc" and built.grpc_client() is built.backend
    assert EmbedderRoute(built).health() == {"embedder": {"backend": "grpc", **NOWHERE}}  # not started: no address yet


def test_the_embedded_ray_shows_its_client_once_ray_made_it() -> None:
    built = build_backend(Settings(backend="ray"))
    assert EmbedderRoute(built).health() == {"embedder": {"backend": "ray", **NOWHERE}}
    assert isinstance(built.backend, EmbeddedRayBackend)
    built.backend._client_factory("127.0.0.1:9")  # what the start makes once Ray is up
    assert EmbedderRoute(built).health()["embedder"]["direct_ingress"] is Settings().ray.ray_direct_ingress
