"""docs/observability.md's metric and door tables list exactly what the gateway's /metrics exports, no more, no less.

Operators build alerts and dashboards from that table: a metric added without a row, or a row left
behind by a rename, is caught here. Names are compared by family (a counter's ``_total`` dropped).
"""

from __future__ import annotations

import re

from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.telemetry import DOORS, OTHER_DOOR, GatewayMetrics
from tests.support import REPO_ROOT

DOC = REPO_ROOT / "docs" / "observability.md"
TABLE_HEADER = "| metric | what |"
PREFIX = "mcp_classifier"
DOCUMENTED = re.compile(r"`((?:mcp_classifier)?_[a-z0-9_]+)(?:\{[a-z,_]*\})?`")


def documented_families() -> set[str]:
    """Metric names in the first cell of each row of the gateway's table (``_x`` is short for ``mcp_classifier_x``)."""
    text = DOC.read_text()
    table = text[text.index(TABLE_HEADER) :].split("\n\n", 1)[0]
    names = set()
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        for name in DOCUMENTED.findall(first_cell):
            full = name if name.startswith(PREFIX) else PREFIX + name
            names.add(full.removesuffix("_total"))
    return names


def exported_families() -> set[str]:
    metrics = GatewayMetrics()
    RedisMetrics(metrics.registry)
    return {family.name for family in metrics.registry.collect()}


def test_the_metric_table_matches_what_the_gateway_exports() -> None:
    documented, exported = documented_families(), exported_families()
    assert documented == exported, f"undocumented: {sorted(exported - documented)}; not exported: {sorted(documented - exported)}"


def test_the_door_table_names_every_door_label() -> None:
    text = DOC.read_text()
    table = text[text.index("| door | requests |") :].split("\n\n", 1)[0]
    documented = {row.split("|")[1].strip().strip("`") for row in table.splitlines()[2:]}
    assert documented == DOORS | {OTHER_DOOR}
