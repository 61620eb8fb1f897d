"""`pypto-build compdb`: compile_commands.json (for clangd and other tools): the commands the build runs.

Each entry is `compile.command.listed`: the very argv the compile action runs (one assembly for both),
under the names the build installs — the output, where the build writes a temp file first, and no
depfile flags (`-MD -MF <temp> -MT <output>`, with which the build learns the headers read). With a
launcher (`--launcher`, `$PYPTO_BUILD_LAUNCHER`, or one `$CXX` starts with), a split kernel's entry is
its compile through the launcher, writing `<output>.o`, which the build links here.

A kernel that takes a precompiled prelude is listed with the flags its compile adds (`-Winvalid-pch -include
<entry>/prelude.h`), decided as the compile action decides it (`prelude_actions.take`) against the store as
it is now: after a build, the command each kernel ran. A kernel whose prelude the store holds no exact entry
of (not built yet, refused, dropped after GCC rejected it, preludes off) is listed as it then compiles:
plainly. Either command gives the same bytes.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..core import atomic
from ..compile.command import OBJECT_SUFFIX, listed, unit_launcher
from ..compile.prelude_actions import take
from ..plan.graph import Graph
from ..core.confine import confine_tree


def compile_commands(graph: Graph, store: str | None = None) -> list[dict]:
    """One entry per compile unit, as clangd reads them (the command each unit runs). `store`: the store of
    precompiled preludes the build uses (`Caches.preludes`; None: off)."""
    root = graph.layout.root
    entries = []
    for plan in graph.plans:
        for unit in plan.units:
            compiler = graph.platform.compiler_for(unit.kind, plan.context.runtime_name)
            launcher = unit_launcher(graph.launcher, compiler)
            use = take(unit, graph.preludes.of(unit.task), store, launcher, began=graph.preludes.begins(unit.task),
                       root=root)
            command = listed(unit, launcher, root, use.flags if use else ())
            directory = unit.cwd or os.path.normpath(root / plan.sub.rel)     # where the compiler runs
            source = unit.source if os.path.isabs(unit.source) else os.path.normpath(root / unit.source)
            written = unit.output + OBJECT_SUFFIX if command.launched else unit.output
            entries.append({"directory": directory, "file": source, "arguments": list(command.compile),
                            "output": os.path.normpath(root / written)})
    return entries


def write_compdb(graph: Graph, path: Path | None = None, store: str | None = None) -> Path:
    """Write compile_commands.json to `path` (anywhere you name), else into the build directory; `store`: as
    `compile_commands` takes it."""
    if path is None:
        path = graph.layout.root / "compile_commands.json"
        confine_tree(graph.layout.root, path, "compile_commands.json")
    path = Path(path)
    atomic.write_text(path, json.dumps(compile_commands(graph, store), indent=1) + "\n")
    return path
