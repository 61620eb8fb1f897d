"""One home per constant (issue 23 item 8): the package spells a PyPTO marker file's name, and sets
PR_SET_PDEATHSIG, in one module only, so a second spelling cannot drift from the first.

Prose may name the files (an error message says which file is wrong): what is checked is a string that IS
a marker's name or a path ending in it (`"kernel_config.py"`, `f"{sub}/kernel_config.py"`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pypto_build
from pypto_build.builddir.markers import MARKERS

PACKAGE = Path(pypto_build.__file__).parent
HOME = PACKAGE / "builddir" / "markers.py"


def package_trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        if "examples" not in path.relative_to(PACKAGE).parts:      # the shipped example is data PyPTO wrote
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def docstring_nodes(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_names(tree: ast.AST, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, text) of every string constant (docstrings aside) that is one of `names` or a path ending in one."""
    skip = docstring_nodes(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and any(node.value == n or node.value.endswith("/" + n) for n in names)]


def test_marker_file_names_are_spelled_only_in_markers():
    names = (*MARKERS, *(Path(m).name for m in MARKERS if "/" in m))
    spelled = {str(path.relative_to(PACKAGE)): found for path, tree in package_trees()
               if path != HOME and (found := spelled_names(tree, names))}
    assert spelled == {}, "use builddir.markers' constants (KERNEL_CONFIG, COMPILED_META, ...)"
    assert spelled_names(ast.parse(HOME.read_text(encoding="utf-8")), ("kernel_config.py",))   # the scan sees one


def test_the_scan_finds_a_path_built_from_a_literal_name():
    tree = ast.parse('import os\ndef f(sub):\n    """Reads kernel_config.py."""\n'
                     '    return (os.path.join(sub, "kernel_config.py"), f"{sub}/kernel_config.py",\n'
                     '            "no kernel_config.py")\n')
    assert spelled_names(tree, ("kernel_config.py",)) == [(4, "kernel_config.py"), (4, "/kernel_config.py")]


def test_pr_set_pdeathsig_is_set_in_one_module():
    defining, calling = [], []
    for path, tree in package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PR_SET_PDEATHSIG"
                                                    for t in node.targets):
                defining.append(path.relative_to(PACKAGE).as_posix())
            if isinstance(node, ast.Attribute) and node.attr == "prctl":
                calling.append(path.relative_to(PACKAGE).as_posix())
    assert defining == ["core/procs.py"] and calling == ["core/procs.py"]
