"""The router-door bench's own parts: the generated classifier is the size asked, and the verdicts read the targets."""

from __future__ import annotations

from loadtests.bench_cache import Measurement
from loadtests.bench_router_classify import generated_classifier, latency_table, weight_table
from mcp_classifier.classify.categories import CategoryConfig


def _row(p50_ms: float, misses: float = 0.0) -> Measurement:
    return Measurement(
        path="x", clients=1, requests=100, failures=0, seconds=1.0, rps=100.0, p50_ms=p50_ms, p99_ms=p50_ms * 2, misses_during=misses
    )


def test_the_generated_classifier_is_a_valid_file_of_distinct_examples() -> None:
    data = generated_classifier(100, 8)
    config = CategoryConfig.model_validate(data)
    texts = [t for c in config.categories for t in c.examples]
    assert len(config.categories) == 100 and len(texts) == 800 == len(set(texts))


def test_the_latency_verdict_is_the_difference_of_medians_and_fails_on_a_miss() -> None:
    rows = {"no-op `POST /mcp/ping`": _row(0.5), "REST tool `POST /mcp/tools/call`": _row(1.2), "router `POST /classify`": _row(1.9)}
    table, ok = latency_table(rows, 1.0)
    assert ok and "+0.700 ms" in table
    assert not latency_table({**rows, "router `POST /classify`": _row(2.3)}, 1.0)[1]
    assert not latency_table({**rows, "router `POST /classify`": _row(1.3, misses=1)}, 1.0)[1]


def test_the_weight_verdict_reads_the_second_classifiers_increment() -> None:
    table, ok = weight_table({"default": 600.0, "second": 608.0, "third": 610.0}, 100, 8, 10.0)
    assert ok and "+8.0" in table and "+2.0" in table
    assert not weight_table({"default": 600.0, "second": 640.0, "third": 644.0}, 100, 8, 10.0)[1]
