"""`--trace FILE` and `compdb`: a run's timeline for Perfetto, and compile_commands.json for clangd."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .. import atomic


def write_trace(spans: list[tuple[str, int, float, float]], path: Path) -> None:
    """Chrome-trace JSON: one complete event per task run, one thread per worker lane."""
    lanes = sorted({lane for _n, lane, _s, _e in spans})
    events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": lane, "args": {"name": f"worker {lane}"}}
              for lane in lanes]
    for name, lane, start, end in sorted(spans, key=lambda s: s[2]):
        events.append({"name": name, "cat": name.split(":")[0], "ph": "X", "pid": 0, "tid": lane,
                       "ts": round(start * 1e6, 1), "dur": round(max(end - start, 0.0) * 1e6, 1)})
    atomic.write_text(Path(path), json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, indent=1) + "\n")


def compile_commands(graph) -> list[dict]:
    """One entry per compile unit, as clangd reads them (the command each unit runs)."""
    root = graph.layout.root
    entries = []
    for plan in graph.plans:
        directory = os.path.normpath(root / plan.sub.rel)
        for unit in plan.units:
            source = unit.source if os.path.isabs(unit.source) else os.path.normpath(root / unit.source)
            entries.append({"directory": directory, "file": source, "arguments": list(unit.argv),
                            "output": os.path.normpath(root / unit.output)})
    return entries


def write_compdb(graph, path: Path | None = None) -> Path:
    """Write compile_commands.json to `path` (anywhere you name), else into the build directory."""
    if path is None:
        from ..layout import confine_tree
        path = graph.layout.root / "compile_commands.json"
        confine_tree(graph.layout.root, path, "compile_commands.json")
    path = Path(path)
    atomic.write_text(path, json.dumps(compile_commands(graph), indent=1) + "\n")
    return path
