"""`which`: a program's path as `shutil.which` finds it on POSIX, in a module of its own that imports only
`os` — the console script's no-op answer (plan/noop_record.py) looks the compiler up before anything else loads."""
from __future__ import annotations

import os


def which(name: str, path: str | None = None) -> str | None:
    """`shutil.which(name, path=path)` as it is on POSIX, without importing shutil (and the compression
    modules it loads) at every run's start: `name` itself when it has a directory part, else the first
    executable file (not a directory) called `name` in `path` (default $PATH)."""
    if os.path.dirname(name):
        return name if _runnable(name) else None
    if path is None:
        path = os.environ.get("PATH", None)
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen: set[str] = set()
    for folder in os.fsdecode(path).split(os.pathsep):
        if folder not in seen:
            seen.add(folder)
            candidate = os.path.join(folder, name)
            if _runnable(candidate):
                return candidate
    return None


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)
