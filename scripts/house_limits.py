"""Reports every function in services/ over 100 lines or with more than 10 parameters.

A function past either limit does several jobs, or takes a bundle that wants a name of its own
(a dataclass): the limits keep each step small enough to read, test and replace alone.

python scripts/house_limits.py            exit 1 when any function is past a limit, listing the worst first
python scripts/house_limits.py PATH ...   the same for other folders or files
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 100
MAX_PARAMETERS = 10
SKIPPED = ("_pb2.py", "_pb2_grpc.py", "_pb2.pyi")  # generated gRPC stubs, never edited by hand


@dataclass(frozen=True)
class Offender:
    """One function past a limit: where it is, and by how much."""

    path: Path
    line: int
    name: str  # qualified within its module: Class.method, outer.inner
    lines: int
    parameters: int

    @property
    def excess(self) -> float:
        """How far past the limits it is, as a fraction of the one it is furthest past (orders the report)."""
        return max(self.lines / MAX_LINES, self.parameters / MAX_PARAMETERS)

    def describe(self, root: Path) -> str:
        where = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return f"{where}:{self.line} {self.name}: {self.lines} lines, {self.parameters} parameters"


Function = ast.FunctionDef | ast.AsyncFunctionDef


def parameter_count(function: Function) -> int:
    """Every parameter a caller can pass, *args and **kwargs included; a method's self or cls is not one."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    if positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def line_count(function: Function) -> int:
    """From the def line to the last line of the body (decorators aside)."""
    return (function.end_lineno or function.lineno) - function.lineno + 1


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function and method in a module, nested ones included, with its qualified name."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def python_files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        found = [path] if path.is_file() else sorted(path.rglob("*.py"))
        yield from (f for f in found if not f.name.endswith(SKIPPED))


def offenders(paths: list[Path]) -> list[Offender]:
    """Every function past a limit under ``paths``, the furthest past first."""
    found = []
    for path in python_files(paths):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, function in functions(tree):
            lines, parameters = line_count(function), parameter_count(function)
            if lines > MAX_LINES or parameters > MAX_PARAMETERS:
                found.append(Offender(path, function.lineno, name, lines, parameters))
    return sorted(found, key=lambda o: (-o.excess, str(o.path), o.line))


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or [ROOT / "services"]
    found = offenders(paths)
    if not found:
        print(f"[house limits] no function over {MAX_LINES} lines or {MAX_PARAMETERS} parameters")
        return 0
    print(f"[house limits] {len(found)} function(s) over {MAX_LINES} lines or {MAX_PARAMETERS} parameters, the worst first:")
    for offender in found:
        print(f"  {offender.describe(ROOT)}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
