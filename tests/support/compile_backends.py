"""torch.compile backends for tests: one that counts what dynamo hands it, one that fails as a host without a C compiler would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class CountingBackend:
    """Runs what dynamo traced (no code generation), counting compiles and calls."""

    def __init__(self) -> None:
        self.compiles = 0
        self.calls = 0

    def __call__(self, graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.compiles += 1

        def run(*args: Any) -> Any:
            self.calls += 1
            return graph.forward(*args)

        return run


def failing_backend(graph: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    raise RuntimeError("no working C compiler")
