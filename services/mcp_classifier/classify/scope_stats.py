"""What the out-of-scope fit expects: plain data, so the gateway shows it without numpy or the model."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

LOOSE_LEAK_SHARE = 0.1
IN_SCOPE_PROBABILITY = 0.5  # the decision point of in_scope, where the logistic says in and out are even


@dataclass(frozen=True)
class ScopeStats:
    """Per category and over all; shown by /health, list_categories and doctor."""

    thresholds: tuple[float, ...]  # per category: the similarity at which in and out of scope are even
    coverage: tuple[float, ...]  # per category: share of its own examples (each left out) kept in scope
    out_of_scope_recall: float  # share of the off-topic texts (each left out) judged out of scope
    negatives: int  # off-topic texts the fit used, after dropping those that look like a category's own
    overridden: tuple[bool, ...]  # per category: the threshold came from the file, not the fit
    # per category: of the off-topic texts nearest to it, the share it would still take in scope
    leaks: tuple[float, ...] = ()
    # per category: the median in-scope probability of its own examples (each left out). Every answer's confidence is
    # multiplied by the in-scope probability, so a query like the file's own loses about this share of it: near 1, the
    # check costs in-domain traffic nothing; at 0.8 (a broad file), a router's threshold of 0.5 drops more of it.
    typical: tuple[float, ...] = ()
    # the share of the packaged background (its texts dropped as a category's own too) the fit takes in scope; at
    # BROAD_FILE_BACKGROUND_SHARE or more the file is broad, and its in-scope answers are read against ``typical``
    background_in_scope: float = 0.0
    broad: bool = False

    def loose(self, index: int) -> bool:
        """A threshold that lets through a tenth or more of the off-topic texts nearest to its category."""
        return bool(self.leaks) and self.leaks[index] >= LOOSE_LEAK_SHARE

    def typical_in_scope(self) -> float | None:
        """The median over categories of their examples' median in-scope probability; None for a fit saved without it."""
        return float(median(self.typical)) if self.typical else None

    def served_typical(self) -> tuple[float, ...]:
        """Per category, its examples' typical in-scope probability as answers carry it: on a broad file read against
        the file's typical one (classify/scope.py), elsewhere as fitted."""
        overall = self.typical_in_scope()
        if not self.broad or overall is None:
            return self.typical
        return tuple(min(1.0, y / overall) if y >= IN_SCOPE_PROBABILITY else y for y in self.typical)

    def to_public(self, names: list[str]) -> dict[str, Any]:
        served = self.served_typical()
        overall = float(median(served)) if served else None
        typical = served or (None,) * len(names)
        return {
            "expected_out_of_scope_recall": round(self.out_of_scope_recall, 4),
            "expected_coverage": round(sum(self.coverage) / max(len(self.coverage), 1), 4),
            "typical_in_scope_probability": None if overall is None else round(overall, 4),
            "background_in_scope": round(self.background_in_scope, 4),
            "broad_file": self.broad,
            "negatives": self.negatives,
            "categories": {
                name: {
                    "threshold": round(t, 4),
                    "expected_coverage": round(c, 4),
                    "typical_in_scope_probability": None if y is None else round(y, 4),
                    "from_file": o,
                    "loose": self.loose(i),
                }
                for i, (name, t, c, y, o) in enumerate(zip(names, self.thresholds, self.coverage, typical, self.overridden))
            },
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "thresholds": list(self.thresholds),
            "coverage": list(self.coverage),
            "out_of_scope_recall": self.out_of_scope_recall,
            "negatives": self.negatives,
            "overridden": list(self.overridden),
            "leaks": list(self.leaks),
            "typical": list(self.typical),
            "background_in_scope": self.background_in_scope,
            "broad": self.broad,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScopeStats:
        return cls(
            thresholds=tuple(float(t) for t in data["thresholds"]),
            coverage=tuple(float(c) for c in data["coverage"]),
            out_of_scope_recall=float(data["out_of_scope_recall"]),
            negatives=int(data["negatives"]),
            overridden=tuple(bool(o) for o in data["overridden"]),
            leaks=tuple(float(x) for x in data.get("leaks", ())),
            typical=tuple(float(x) for x in data.get("typical", ())),
            background_in_scope=float(data.get("background_in_scope", 0.0)),
            broad=bool(data.get("broad", False)),
        )


def public_scope(stats: ScopeStats | None, names: list[str], detect: bool) -> dict[str, Any]:
    """The ``scope`` block of /health and list_categories: an object in every case, never null.

    ``detect`` is the file's ``detect_out_of_scope``. Where it is false (the packaged default, whose ``general``
    category takes anything), every query is in scope, and the block says so (coverage 1, out-of-scope recall 0,
    no thresholds) rather than being null, so a router reading ``.scope`` learns that its threshold meets the
    category's own probability alone.
    """
    if not detect:
        return {
            "detect_out_of_scope": False,
            "expected_out_of_scope_recall": 0.0,
            "expected_coverage": 1.0,
            "typical_in_scope_probability": 1.0,
            "background_in_scope": 1.0,
            "broad_file": False,
            "negatives": 0,
            "categories": {
                name: {"threshold": None, "expected_coverage": 1.0, "typical_in_scope_probability": 1.0, "from_file": False, "loose": False}
                for name in names
            },
        }
    return {"detect_out_of_scope": True, **(stats.to_public(names) if stats is not None else {})}
