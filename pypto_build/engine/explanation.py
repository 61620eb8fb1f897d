"""Why each unit would run: `pypto-build explain` and `build --dry-run` (like ninja -d explain / -n).

Evaluates every task's up-to-date check against the saved state without
running anything and without writing: the state database is opened read-only
(sqlite `mode=ro`, under the shared lock taken on a read-only descriptor), so
it works on a read-only directory, and a never-built directory is not touched
at all (no state folder is created).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan import invalidation
from ..core import stages
from ..plan.graph import Graph

if TYPE_CHECKING:
    from .depstate import ContentDependency


@dataclass(frozen=True)
class Explanation:
    """Why one task would run, or that it is up to date (what `explain` and `build --dry-run` print)."""

    task: str
    status: str      # "run" | "up-to-date" | "error"
    reason: str
    how: str = ""    # a kernel's last compile: "with prelude:<name>" or "plainly: <why>" (precompiled preludes)


def explain(graph: Graph, only: list[str] | None = None, *, recompile: bool = False) -> list[Explanation]:
    """The status and reason of every task of the build (or of `only`), in dispatch order.

    With `recompile`, what `build --recompile` would do: every compile unit runs; so it does while an
    `invalidate_binary_cache()` mark waits for the next build.
    """
    from .loader import BuildDirLoader

    root = graph.layout.root
    tasks = [t for t in BuildDirLoader(root, graph=graph, quiet=True).load_tasks(None, [])
             if t.actions and (t.name.startswith((*stages.BUILD, _VALIDATE)) or (only and t.name in only))]
    by_name = {t.name: t for t in tasks}
    why = invalidation.forcing(root, recompile)
    with read_only_state(root, graph.platform.name) as dep:
        out = evaluate(dep, tasks, by_name, forced=set(graph.compile_tasks) if why else set(),
                       forced_by=why or invalidation.RECOMPILE)
        verdicts = _verdicts(dep, [n for n in out if n.startswith(_VALIDATE)])
    names = [n for n in out if not n.startswith(_VALIDATE) or n in verdicts or (only and n in only)]
    for n in verdicts:
        out[n] = _with_verdict(out[n], verdicts[n])
    if only:
        missing = [n for n in only if n not in by_name]
        if missing:
            from ..errors import UserError
            raise UserError(f"{root}: no task named {', '.join(missing)}; `pypto-build doit list --all "
                            f"{root}` lists them")
        names = [n for n in names if n in only]
    return [out[n] for n in names]


@contextlib.contextmanager
def read_only_state(root: Path, platform: str, force: tuple[str, ...] = ()) -> Iterator[ContentDependency | None]:
    """`platform`'s state of the directory (what a build would take) opened read-only (sqlite `mode=ro`) under the shared lock taken on a read-only
    descriptor, with the root as working directory; None when it was never built (nothing is created).
    Whatever a check refreshes in it is discarded: reading writes nothing."""
    from ..builddir.state_dir import STATE_DB, STATE_DIR, current_state_folder
    from .lock import dir_lock
    from .statedb import open_state

    state = root / current_state_folder(root, platform) / STATE_DB
    if not state.exists():
        yield None
        return
    with dir_lock(root / STATE_DIR, quiet=True, shared=True), contextlib.chdir(root):
        dep = open_state(state, adopt=False, read_only=True, force=force)
        try:
            yield dep
        finally:
            dep.backend.discard()              # drop refreshed states: reading writes nothing


def evaluate(dep: ContentDependency | None, tasks: list, by_name: dict,
             forced: set[str] | frozenset[str] = frozenset(), forced_by: str = invalidation.RECOMPILE) -> dict[str, Explanation]:
    """Each of `tasks` (with actions) judged against the state `dep` (None: never built), in dispatch order;
    `forced` tasks run whatever their state says (`forced_by` says why)."""
    out: dict[str, Explanation] = {}
    for t in _ordered(tasks, by_name):
        if not t.actions:                   # a group: its members are judged
            continue
        if dep is None:
            out[t.name] = Explanation(t.name, "run", "never built")
            continue
        out[t.name] = _one(dep, t, by_name)
        if t.name in forced and out[t.name].status == "up-to-date":
            out[t.name] = Explanation(t.name, "run", f"forced by {forced_by}")
        if out[t.name].status == "up-to-date":
            after = [d for d in t.task_dep if d in out and out[d].status == "run"]
            if after and _propagates(t.name):
                out[t.name] = Explanation(t.name, "run", f"after {after[0]}")
    return out


_VALIDATE = stages.prefix(stages.VALIDATE)
_PROPAGATING = tuple(map(stages.prefix, (stages.SPLICE, stages.STAMP, stages.REPLAY, stages.VALIDATE)))


def _verdicts(dep: ContentDependency | None, names: list[str]) -> dict[str, str]:
    """The validations among `names` with a recorded verdict, and that verdict (PASSED, ...)."""
    if dep is None:
        return {}
    found = {n: (dep.get_values(n) or {}).get("verdict") if dep.recorded(n) else None for n in names}
    return {n: str(v) for n, v in found.items() if v}


def _with_verdict(e: Explanation, verdict: str) -> Explanation:
    """A validation's explanation saying whether its last verdict still holds (and, when not, why)."""
    if e.status == "up-to-date":
        return Explanation(e.task, e.status, f"the last verdict ({verdict}) still holds")
    return Explanation(e.task, e.status, f"{e.reason}: the last verdict ({verdict}) no longer holds")


def _propagates(name: str) -> bool:
    # A re-run ptoas rewrites the raw output (splice follows); any compile removes the stamp (stamp follows).
    # Compiles themselves decide by their own inputs once the splice has run; a verdict is on the binaries.
    return name.startswith(_PROPAGATING)


def _ordered(tasks: list, by_name: dict) -> list:
    """`tasks` and what they depend on, each after its dependencies (as doit dispatches them)."""
    seen: set[str] = set()
    order: list = []

    def visit(t) -> None:
        if t.name in seen:
            return
        seen.add(t.name)
        for d in t.task_dep:
            if d in by_name:
                visit(by_name[d])
        order.append(t)
    for t in tasks:
        visit(t)
    return order


def _one(dep, task, by_name: dict) -> Explanation:
    """The task's status and reason, in the words a build uses (`ContentDependency.reasons`), and for a unit
    whose graph planned a precompiled prelude, how it last compiled."""
    found = _judged(dep, task, by_name)
    if task.name.startswith(stages.UNITS) and dep.recorded(task.name):
        how = (dep.get_values(task.name) or {}).get("prelude")
        if isinstance(how, str):
            return Explanation(found.task, found.status, found.reason, how)
    return found


def _judged(dep, task, by_name: dict) -> Explanation:
    if not dep.recorded(task.name) and not dep.failed(task.name):
        for utd, _a, _k in task.uptodate:          # what a build does on first sight (it adopts by content)
            adopt = getattr(utd, "adopt", None)
            if adopt is not None and adopt(dep.get_values) is not None:
                return Explanation(task.name, "up-to-date", "taken as found (first sight)")
    result = dep.get_status(task, by_name, get_log=True)
    if result.status == "up-to-date":
        return Explanation(task.name, "up-to-date", "")
    if result.status == "error":
        return Explanation(task.name, "error", result.get_error_message())
    return Explanation(task.name, "run", dep.reasons.get(task.name) or "never built")


def no_preludes_line(graph: Graph, items: list[Explanation]) -> str | None:
    """For `explain --all`: why no built kernel says how it last compiled, when the platform offers no
    precompiled prelude here (host without PTO_ISA_ROOT, say); None when it offers them or nothing is built."""
    built = any(e.task.startswith(stages.prefix(stages.COMPILE)) and e.status == "up-to-date" for e in items)
    if not built or any(e.how for e in items) or graph.platform.facts.no_preludes is None:
        return None
    return (f"pypto-build: no precompiled preludes on {graph.platform.name} here, so no kernel says how it last "
            f"compiled: {graph.platform.facts.no_preludes}")


def format_lines(items: list[Explanation], *, all_tasks: bool = False) -> list[str]:
    """One line per stale task and per recorded verdict (holding or not), then the counts a build would print
    (compile units; other stages after; verdicts that no longer hold)."""
    lines = [f"{e.task}: {e.reason if e.status != 'up-to-date' or e.task.startswith(_VALIDATE) else 'up to date'}"
             + (" (error)" if e.status == "error" else "") + (f" (last compiled {e.how})" if e.how else "")
             for e in items if all_tasks or e.status != "up-to-date" or e.task.startswith(_VALIDATE)]
    units = [e for e in items if e.task.startswith(stages.UNITS)]
    parts = [f"{sum(1 for e in units if e.status == 'run')} would compile",
             f"{sum(1 for e in units if e.status == 'up-to-date')} up to date"]
    others: dict[str, int] = {}
    for e in items:
        if e.status == "run" and not e.task.startswith((*stages.UNITS, _VALIDATE)):
            stage = e.task.split(":")[0]
            others[stage] = others.get(stage, 0) + 1
    if others:
        parts.append("also " + ", ".join(f"{n} {stage}" for stage, n in others.items()))
    stale = sum(1 for e in items if e.status == "run" and e.task.startswith(_VALIDATE))
    if stale:
        parts.append(f"{stale} verdict(s) no longer hold")
    errors = sum(1 for e in items if e.status == "error")
    if errors:
        parts.append(f"{errors} cannot be checked")
    lines.append("pypto-build: " + ", ".join(parts))
    return lines
