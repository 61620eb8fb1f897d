"""The no-op fast path: "nothing to do" decided from stats alone, before doit loads.

After a full build that ended with every unit current, `record()` writes
`.pypto_build/noop.json`: a key (package, platform, options, environment,
the compiler as resolved with its `--version`, ptoas as resolved) and the stat
signature of every file and directory the decision read — sources, headers
(system ones too), outputs, stamps, `.pto` units, manifests, the compiler and
ptoas binaries, the package's own files. `check()` compares those stats and the
key; any difference or a missing file sends the run down the normal path, which
re-decides by content. A file that changed after the run that records started
(by ctime, `racy.changed_since`) is never recorded: its stat may not be what the
decision saw. Every run that goes through doit removes the record first, so it
never outlives the state it summarises.

The key is built from what the decision compares, looked up the same way:
`$CXX` resolved on PATH through every symbolic link and its `--version` text
(a retargeted `g++` link, a wrapper script or launcher running another
compiler) and ptoas found as `ptoas.find_ptoas` finds it. The binaries' content
is compared by stat (never hashed here).

Not used when PTO_ISA_ROOT is set (its identity needs git), when a run
selects tasks, forces a rebuild (`--recompile`, an `invalidate_binary_cache()`
mark) or could not apply a `.pto` edit.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..core import atomic, safeio
from . import invalidation
from ..core import stages
from ..errors import ToolchainError, warn
from ..builddir.markers import STATE_DIR, current_state_folder
from ..pto import find_ptoas, identity_files
from ..core.racy import changed_since
from ..toolchain.compiler import PACKAGE_DIR, probe_compiler

if TYPE_CHECKING:
    from .graph import Graph

RECORD = "noop.json"
ENV_KEYS = ("CXX", "CXXFLAGS", "PTO_ISA_ROOT", "PTOAS_ROOT", "PYPTO_REBUILD_FROM_PTO", "PATH")
FIND = object()    # `key(ptoas_path=FIND)`: look ptoas up now


def key(platform: str, rebuild_from_pto: bool | None, ptoas: str | None, env: dict | None = None, *,
        compiler: str | None = None, ptoas_path: str | None | object = FIND) -> str | None:
    """What the decision depends on besides files; None when the fast path must not be used.

    `compiler` (a `CompilerProbe.digest`) and `ptoas_path` are what planning found
    (when recording); left out, they are looked up now (when checking).
    """
    env = os.environ if env is None else env
    if env.get("PTO_ISA_ROOT"):
        return None
    if compiler is None:
        try:
            compiler = probe_compiler(env.get("CXX") or "g++", path=env.get("PATH")).digest
        except (ToolchainError, ValueError):
            return None                       # the full path says what is wrong
    if ptoas_path is FIND:
        ptoas_path = find_ptoas(ptoas, env).path
    parts = [__version__, platform, repr(rebuild_from_pto), *(f"{k}={env.get(k, '')}" for k in ENV_KEYS),
             compiler, str(ptoas_path)]
    return json.dumps(parts)


def signature(path: str) -> list[int] | None:
    try:
        return _signature(os.stat(path))
    except OSError:
        return None


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]


def tool_paths(compiler: str, ptoas_path: str | None) -> list[str]:
    """Files outside the build dir whose change must defeat the fast path: the binaries the key names
    (ptoas with the binary its launcher runs) and the package's own files."""
    paths = [compiler]
    if ptoas_path:
        try:
            paths += identity_files(ptoas_path)
        except (OSError, ValueError):
            paths.append(ptoas_path)          # unreadable: its stat (or absence) is all we can compare
    paths += [str(p) for p in sorted(PACKAGE_DIR.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
              and "examples" not in p.parts]
    return paths


def check(root: Path, make_key: Callable[[], str | None]) -> dict | None:
    """The recorded summary when nothing changed since the last full build, else None.

    `make_key` runs last (it starts the compiler's `--version`), only when every stat still matches.
    An `invalidate_binary_cache()` mark waiting for the next build is never a no-op.
    """
    if invalidation.pending(root) is not None:
        return None
    try:
        data = json.loads(safeio.read_text(Path(root) / STATE_DIR / RECORD))
        base = os.fspath(root)
        for path, sig in data["stats"].items():
            if signature(path if os.path.isabs(path) else os.path.join(base, path)) != sig:
                return None
        run_key = make_key()
        return data if run_key is not None and data.get("key") == run_key else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def record(root: Path, run_key: str | None, paths: list[str], summary: dict, since_ns: int) -> bool:
    """Write the record if every path exists and none changed since `since_ns` (the run's start); else remove it."""
    root = Path(root)
    invalidate(root)
    if run_key is None:
        return False
    stats = {}
    for path in dict.fromkeys(paths):
        try:
            st = os.stat(path if os.path.isabs(path) else os.path.join(root, path))
        except OSError:
            return False
        if changed_since(st, since_ns):
            return False
        stats[path] = _signature(st)
    try:
        atomic.write_text(root / STATE_DIR / RECORD, json.dumps({"key": run_key, "stats": stats, **summary}),
                          sweep=True)
    except OSError as exc:      # only a shortcut is lost: the build itself is complete
        from ..core.oserrors import describe
        warn(f"{describe(exc, doing='written')} (the build is complete; until then every build decides by "
             "content)")
        return False
    return True


def _changed_since(path: Path, since_ns: int) -> bool:
    """Whether `record` would refuse `path`: gone, or changed after `since_ns` (racy window included)."""
    try:
        return changed_since(os.stat(path), since_ns)
    except OSError:
        return True


def invalidate(root: Path) -> None:
    (Path(root) / STATE_DIR / RECORD).unlink(missing_ok=True)


def record_graph(graph: Graph, tasks: list) -> bool:
    """After a full, clean build of `graph` (doit's `tasks`): let the next identical run skip doit."""
    from ..compile import header_sets
    if graph is None or graph.unknown_identities() or not graph.platform.noop_record:
        return False
    values = {t.name: t.values if isinstance(t.values, dict) else {} for t in tasks}
    sets = {v["outside"] for v in values.values() if v.get("outside")}
    folder = current_state_folder(graph.layout.root, graph.platform.name)
    header_sets.prune(graph.layout.root, sets, folder)
    if any(v.get("not_applied") or v.get("forced") for v in values.values()):
        return False
    if any(_changed_since(graph.layout.root / p.stamp_path, graph.planned_ns) for p in graph.plans):
        return False            # a unit ran (its stamp was rewritten): `record` would refuse; skip gathering
    paths: list[str] = [".", *graph.layout.markers]
    for extra in ("orchestration", "next_levels"):
        if (graph.layout.root / extra).is_dir():
            paths.append(extra)
    for p in graph.plans:
        sub = p.sub.rel
        paths += [sub, p.stamp_path, f"{sub}/kernel_config.py" if sub != "." else "kernel_config.py"]
        if (p.sub.path / "ptoas").is_dir():
            paths.append("ptoas" if sub == "." else f"{sub}/ptoas")
        for u in p.units:
            paths += [u.source, u.output, *(values.get(u.task, {}).get("headers") or {})]
    outside = header_sets.files_of(sets, folder)   # headers outside the build directory, and their records
    if outside is None:
        return False                           # a record is gone: its units rebuild next run
    paths += outside
    for u in graph.pto.units:
        paths += [u.pto, u.raw, u.record]
    names = [t.name for t in tasks if t.actions and t.name.startswith(stages.BUILD)
             and not t.name.startswith(stages.prefix(stages.PRELUDE))]    # a prelude is a kernel's setup only
    lines = [graph.header()] + ([graph.pto.skipped_line] if graph.pto.skipped_line else [])
    if graph.layout.stale:
        return False            # keep saying it: the leftover line is printed by the full path only
    # The key and the tools as planning saw them: what changed since is caught by `since_ns`.
    pto, compiler = graph.pto.options, graph.platform.compiler_for("kernel")
    ptoas_path = graph.pto.lookup.path if graph.pto.lookup else find_ptoas(pto.ptoas).path
    run_key = key(graph.platform.name, pto.enabled, pto.ptoas, compiler=compiler.probe, ptoas_path=ptoas_path)
    paths += tool_paths(compiler.path, ptoas_path)
    return record(graph.layout.root, run_key, paths, {"tasks": names, "lines": lines}, graph.planned_ns)
