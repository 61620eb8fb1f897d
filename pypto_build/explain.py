"""Why each unit would run: `pypto-build explain` and `build --dry-run` (like ninja -d explain / -n).

Evaluates every task's up-to-date check against the saved state without
running anything and without writing: the state database is opened read-only
(sqlite `mode=ro`, under the shared lock taken on a read-only descriptor), so
it works on a read-only directory, and a never-built directory is not touched
at all (no state folder is created).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

from .graph import Graph


@dataclass(frozen=True)
class Explanation:
    task: str
    status: str      # "run" | "up-to-date" | "error"
    reason: str


def explain(graph: Graph, only: list[str] | None = None) -> list[Explanation]:
    """The status and reason of every task of the build (or of `only`), in dispatch order."""
    from .engine import BuildDirLoader, STATE_DB
    from .layout import STATE_DIR
    from .lock import dir_lock
    from .statedb import open_state

    root = graph.layout.root
    build_stages = ("ptoas:", "splice:", "compile:", "orch:", "stamp:")
    tasks = [t for t in BuildDirLoader(root, graph=graph, quiet=True).load_tasks(None, [])
             if t.actions and (t.name.startswith(build_stages) or (only and t.name in only))]
    by_name = {t.name: t for t in tasks}
    state = root / STATE_DIR / STATE_DB
    out: dict[str, Explanation] = {}
    if not state.exists():
        out = {t.name: Explanation(t.name, "run", "never built") for t in tasks}
    else:
        with dir_lock(root / STATE_DIR, quiet=True, shared=True), contextlib.chdir(root):
            dep = open_state(state, adopt=False, read_only=True)
            try:
                for t in _ordered(tasks, by_name):
                    out[t.name] = _one(dep, t, by_name)
                    if out[t.name].status == "up-to-date":
                        after = [d for d in t.task_dep if d in out and out[d].status == "run"]
                        if after and _propagates(t.name):
                            out[t.name] = Explanation(t.name, "run", f"after {after[0]}")
            finally:
                dep.backend._conn.close()          # discard refreshed states: explaining writes nothing
    names = [t.name for t in _ordered(tasks, by_name)]
    if only:
        missing = [n for n in only if n not in by_name]
        if missing:
            from .errors import PyptoBuildError
            raise PyptoBuildError(f"{root}: no task named {', '.join(missing)}; `pypto-build doit list --all "
                                  f"{root}` lists them")
        names = [n for n in names if n in only]
    return [out[n] for n in names]


def _propagates(name: str) -> bool:
    # A re-run ptoas rewrites the raw output (splice follows); any compile removes the stamp (stamp follows).
    # Compiles themselves decide by their own inputs once the splice has run.
    return name.startswith(("splice:", "stamp:", "replay:"))


def _ordered(tasks: list, by_name: dict) -> list:
    seen: dict[str, object] = {}

    def visit(t) -> None:
        if t.name in seen:
            return
        seen[t.name] = None
        for d in t.task_dep:
            if d in by_name:
                visit(by_name[d])
        seen[t.name] = t
    for t in tasks:
        visit(t)
    return [t for t in seen.values() if t is not None]


def _one(dep, task, by_name: dict) -> Explanation:
    result = dep.get_status(task, by_name, get_log=True)
    if result.status == "up-to-date":
        return Explanation(task.name, "up-to-date", "")
    reasons = result.reasons
    if result.status == "error":
        return Explanation(task.name, "error", result.get_error_message())
    for utd, _a, _k in reasons.get("uptodate_false") or []:
        text = getattr(utd, "reason", "") or ("runs every time it is asked for" if utd is False else "")
        if text:
            return Explanation(task.name, "run", text)
    for key, word in (("missing_target", "output missing"), ("changed_file_dep", "changed"),
                      ("missing_file_dep", "missing input"), ("added_file_dep", "new input"),
                      ("removed_file_dep", "input removed")):
        if reasons.get(key):
            items = reasons[key] if isinstance(reasons[key], list) else [reasons[key]]
            return Explanation(task.name, "run", f"{word}: {', '.join(map(str, items))}")
    if reasons.get("checker_changed"):
        return Explanation(task.name, "run", "state written by another checker")
    return Explanation(task.name, "run", "never built")


def format_lines(items: list[Explanation], *, all_tasks: bool = False) -> list[str]:
    lines = [f"{e.task}: {e.reason if e.status != 'up-to-date' else 'up to date'}"
             + (" (error)" if e.status == "error" else "")
             for e in items if all_tasks or e.status != "up-to-date"]
    run = sum(1 for e in items if e.status == "run")
    lines.append(f"pypto-build: {run} would run, {sum(1 for e in items if e.status == 'up-to-date')} up to date"
                 + (f", {sum(1 for e in items if e.status == 'error')} cannot be checked"
                    if any(e.status == "error" for e in items) else ""))
    return lines
