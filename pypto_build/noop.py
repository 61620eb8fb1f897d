"""The no-op fast path: "nothing to do" decided from stats alone, before doit loads.

After a full build that ended with every unit current, `record()` writes
`.pypto_build/noop.json`: a key (package, platform, options, environment,
resolved tools) and the stat signature of every file and directory the
decision read — sources, headers, outputs, stamps, `.pto` units, manifests,
the compiler, the runtime headers. `check()` compares those stats; any
difference, a missing file or a younger-than-2-s file sends the run down the
normal path, which re-decides by content. Every run that goes through doit
removes the record first, so it never outlives the state it summarises.

Not used when PTO_ISA_ROOT is set (its identity needs git) or when a run
selects tasks, forces a rebuild or could not apply a `.pto` edit.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from . import __version__, atomic, safeio, settings
from .hashing import RACY_NS

RECORD = "noop.json"
STATE_DIR = ".pypto_build"
ENV_KEYS = ("CXX", "CXXFLAGS", "PTO_ISA_ROOT", "PTOAS_ROOT", "PYPTO_REBUILD_FROM_PTO", "PATH")
PACKAGE_DIR = Path(__file__).resolve().parent


def key(platform: str, rebuild_from_pto: bool | None, ptoas: str | None, env: dict | None = None) -> str | None:
    """What the decision depends on besides files; None when the fast path must not be used."""
    env = os.environ if env is None else env
    if env.get("PTO_ISA_ROOT"):
        return None
    words = settings.words("CXX", env, "g++") or ["g++"]
    tools = [shutil.which(words[0], path=env.get("PATH")), ptoas,
             shutil.which("ptoas", path=env.get("PATH")) if not env.get("PTOAS_ROOT") else env.get("PTOAS_ROOT")]
    parts = [__version__, platform, repr(rebuild_from_pto), *(f"{k}={env.get(k, '')}" for k in ENV_KEYS),
             *(str(t) for t in tools)]
    return json.dumps(parts)


def signature(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]


def tool_paths(env: dict | None = None) -> list[str]:
    """Files outside the build dir whose change must defeat the fast path."""
    env = os.environ if env is None else env
    words = settings.words("CXX", env, "g++") or ["g++"]
    found = shutil.which(words[0], path=env.get("PATH"))
    paths = [os.path.realpath(found)] if found else []
    paths += [str(p) for p in sorted(PACKAGE_DIR.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
              and "examples" not in p.parts]
    return paths


def check(root: Path, run_key: str | None) -> dict | None:
    """The recorded summary when nothing changed since the last full build, else None."""
    if run_key is None:
        return None
    try:
        data = json.loads(safeio.read_text(Path(root) / STATE_DIR / RECORD))
        if data.get("key") != run_key:
            return None
        base = os.fspath(root)
        for path, sig in data["stats"].items():
            if signature(path if os.path.isabs(path) else os.path.join(base, path)) != sig:
                return None
        return data
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def record(root: Path, run_key: str | None, paths: list[str], summary: dict) -> bool:
    """Write the record if every path exists and is past the racy window; else remove it."""
    root = Path(root)
    invalidate(root)
    if run_key is None:
        return False
    now = time.time_ns()
    stats = {}
    for path in dict.fromkeys([*paths, *tool_paths()]):
        sig = signature(path if os.path.isabs(path) else os.path.join(root, path))
        if sig is None or now - sig[0] <= RACY_NS:
            return False
        stats[path] = sig
    try:
        atomic.write_text(root / STATE_DIR / RECORD, json.dumps({"key": run_key, "stats": stats, **summary}),
                          sweep=True)
    except OSError as exc:      # only a shortcut is lost: the build itself is complete
        from .oserrors import describe
        print(f"pypto-build: warning: {describe(exc, doing='written')} (the build is complete; until then "
              "every build decides by content)", file=sys.stderr, flush=True)
        return False
    return True


def invalidate(root: Path) -> None:
    (Path(root) / STATE_DIR / RECORD).unlink(missing_ok=True)
