"""Run a Python file of a build directory (`golden.py`, `host_orch.py`) from its source.

Only replay and validate do this, as PyPTO does. The file's own text is compiled
and run: nothing is written into the build directory (no `__pycache__/`), and no
stale or planted `.pyc` there runs instead of the source you can read. A FIFO
or device in its place is refused (`safeio`), never read.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType

from .safeio import read_bytes


def exec_file(module: ModuleType, path: Path) -> None:
    """Execute `path` in `module`'s namespace (what `loader.exec_module` does, minus the bytecode cache)."""
    code = compile(read_bytes(Path(path)), str(path), "exec", dont_inherit=True)
    exec(code, module.__dict__)
