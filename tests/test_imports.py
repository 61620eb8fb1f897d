"""The package's imports form no circle, counting the imports inside functions (issue 12, item 1).

A circle hidden by an import inside a function still ties the modules together:
neither can be understood, tested or moved without the other.
"""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pypto_build

PACKAGE = Path(pypto_build.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The package's modules that `path` imports anywhere in its text (top level or inside functions)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found |= {c for c in (target, *(f"{target}.{a.name}" for a in node.names)) if c in known}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
    return found - {name}


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "examples" not in p.relative_to(PACKAGE).parts]
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) for p in paths}


def test_the_walk_sees_imports_inside_functions():
    graph = import_graph()
    assert "pypto_build.run.execution" in graph["pypto_build.run.child"]        # `from .execution import` in a function
    assert "pypto_build.runtime.executor" in graph["pypto_build.runtime.l3"]


def test_no_import_circle():
    graph = import_graph()
    # a package's __init__ only names its modules for lazy access (PEP 562); importing the package is not
    # a use of what it re-exports, so edges into a package are left out
    packages = {name for name in graph if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()}
    sorter = graphlib.TopologicalSorter({m: deps - packages for m, deps in graph.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None
