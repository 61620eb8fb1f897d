"""Run a Python file of a build directory (`golden.py`, `host_orch.py`) from its source.

Only replay and validate do this, as PyPTO does. The file's own text is compiled
and run: nothing is written into the build directory (no `__pycache__/`), and no
stale or planted `.pyc` there runs instead of the source you can read.
"""
from __future__ import annotations

from pathlib import Path
from types import ModuleType


def exec_file(module: ModuleType, path: Path) -> None:
    """Execute `path` in `module`'s namespace (what `loader.exec_module` does, minus the bytecode cache)."""
    code = compile(Path(path).read_bytes(), str(path), "exec", dont_inherit=True)
    exec(code, module.__dict__)
