"""`pypto-build compdb`: compile_commands.json (for clangd) with the exact command of every compile unit."""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import atomic
from .graph import Graph
from .confine import confine_tree


def compile_commands(graph: Graph) -> list[dict]:
    """One entry per compile unit, as clangd reads them (the command each unit runs)."""
    root = graph.layout.root
    entries = []
    for plan in graph.plans:
        for unit in plan.units:
            directory = unit.cwd or os.path.normpath(root / plan.sub.rel)     # where the compiler runs
            source = unit.source if os.path.isabs(unit.source) else os.path.normpath(root / unit.source)
            entries.append({"directory": directory, "file": source, "arguments": list(unit.argv),
                            "output": os.path.normpath(root / unit.output)})
    return entries


def write_compdb(graph: Graph, path: Path | None = None) -> Path:
    """Write compile_commands.json to `path` (anywhere you name), else into the build directory."""
    if path is None:
        path = graph.layout.root / "compile_commands.json"
        confine_tree(graph.layout.root, path, "compile_commands.json")
    path = Path(path)
    atomic.write_text(path, json.dumps(compile_commands(graph), indent=1) + "\n")
    return path
