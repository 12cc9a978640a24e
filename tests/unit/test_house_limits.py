"""scripts/house_limits.py: every function in services/ stays within 100 lines and 10 parameters.

A function past either limit does several jobs or takes what belongs in an object of its own; CI runs the script
too, and this test holds the whole package to it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.support import REPO_ROOT

SERVICES = REPO_ROOT / "services"


def _house_limits() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house_limits", REPO_ROOT / "scripts" / "house_limits.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


house_limits = _house_limits()


def test_no_function_in_services_is_over_the_limits() -> None:
    found = house_limits.offenders([SERVICES])
    assert not found, "\n".join(o.describe(REPO_ROOT) for o in found)
    assert house_limits.main([str(SERVICES)]) == 0


def test_long_functions_and_long_parameter_lists_are_found_nested_and_in_classes(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(100))
    params = ", ".join(f"p{i}" for i in range(11))
    (tmp_path / "sample.py").write_text(
        f"def long():\n{body}\n\n"
        f"def wide({params}):\n    pass\n\n"
        "class Kept:\n"
        "    def method(self, a, b, c, d, e, f, g, h, i, j):\n        pass\n\n"
        "    @classmethod\n"
        "    def build(cls, *args, a, b, c, d, e, f, g, h, i, **kwargs):\n        pass\n\n"
        "def outer():\n"
        f"    def inner(*, {params}):\n        pass\n"
    )
    found = {o.name: (o.lines, o.parameters) for o in house_limits.offenders([tmp_path])}
    assert found == {"long": (101, 0), "wide": (2, 11), "Kept.build": (2, 11), "outer.inner": (2, 11)}
    assert house_limits.main([str(tmp_path)]) == 1


def test_a_tree_within_the_limits_passes(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(99))
    (tmp_path / "sample.py").write_text(f"def fits(self, a, b, c, d, e, f, g, h, i, j):\n{body}\n")
    assert house_limits.offenders([tmp_path]) == []
    assert house_limits.main([str(tmp_path)]) == 0
