"""A planned `Graph` as doit task dicts: the only module that wires every stage's actions and checks.

Per `.pto` unit a `ptoas:` and a `splice:` task; per sub-build one `compile:`
task per kernel, one `orch:` task per orchestration and one `stamp:` task that
writes cache/binary_context.json after all of them; per run target a
`replay:` and a `validate:` task (the run stage's own: run/tasks.py). Task dicts are plain data plus module-level
actions (picklable for `-j`): the contract with doit.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from ..core import stages
from ..cache import Caches
from ..compile.actions import run_compile, run_stamp
from ..compile.command import unit_launcher
from ..plan.graph import Graph
from ..compile.header_sets import SetChecker
from ..builddir.state_dir import current_state_folder
from ..run import task_dicts as run_tasks
from ..builddir.runconfig import RunSpec
from ..compile.steps import run_step
from ..compile.checks import StampCheck, StepCheck, UnitCheck

if TYPE_CHECKING:
    from ..core.shared_flag import SharedFlag

DEFAULT_TASKS = (stages.STAMP,)


def task_dicts(graph: Graph, caches: Caches | None = None, run: RunSpec | None = None) -> dict[str, list[dict]]:
    """doit task dicts grouped by basename (`ptoas`, `splice`, `prelude`, `compile`, `orch`, `stamp`, `replay`,
    `validate`).

    `caches`: where compiles restore from and store to (default none); `run`: how replay/validate run
    the program (default: RunConfig() and the default timeout).
    """
    caches, run = caches or Caches(), run or RunSpec()
    groups: dict[str, list[dict]] = {stage: [] for stage in stages.ALL}
    splices = _pto_tasks(groups, graph) if graph.pto.units else {}
    folder = current_state_folder(graph.layout.root, graph.platform.name)     # the platform's own state
    sets = SetChecker(folder)             # headers outside the build dir: each shared set checked once per run
    dropped = _prelude_tasks(groups, graph, caches.preludes, caches.fresh_preludes)
    for p in graph.plans:
        context_digest, why = p.context.digest, p.context.unknown
        for unit in p.units:
            base, _, name = unit.task.partition(":")
            compiler = graph.platform.compiler_for(unit.kind, p.context.runtime_name)
            compiler_id = compiler.identity
            launcher = unit_launcher(graph.launcher, compiler)
            prelude = graph.preludes.of(unit.task) if caches.preludes else None
            began = graph.preludes.begins(unit.task)
            groups[base].append({
                "task_dep": splices.get(unit.sub_rel, []) if unit.kind == "kernel" else [],
                # built before the kernel only when the kernel is to compile (doit's setup tasks), and never for
                # a launcher's compile (it compiles plainly: prelude_actions.take)
                "setup": [prelude.task] if prelude and launcher is None and began else [],
                "name": name,
                "doc": f"{unit.kind} {unit.source} -> {unit.output}",
                "actions": [(run_compile, [unit, compiler_id, context_digest, folder, caches.directory, caches.remote,
                                          launcher, prelude, caches.preludes, dropped, began])],
                "file_dep": [unit.source],
                "targets": [unit.output],
                "uptodate": [UnitCheck(unit.argv_key, compiler_id, context_digest, why, unit.output, sets)],
                "clean": True,
                "meta": {"unit": unit},
            })
        for step in p.steps:
            base, _, name = step.task.partition(":")
            groups[base].append({
                "name": name,
                "doc": f"{step.kind} {step.input} -> {step.output}",
                "actions": [(run_step, [step])],
                "file_dep": [step.input],
                "targets": [step.output],
                "uptodate": [StepCheck(step.key, step.input, step.output)],
                "clean": True,
            })
        fields = None if why else p.context.stamp_fields()
        groups[stages.STAMP].append({
            "name": p.sub.name,
            "doc": f"binary context stamp of {p.sub.rel}",
            "actions": [(run_stamp, [p.stamp_path, fields, why])],
            "task_dep": _dispatch_order(graph, p, bool(caches.preludes)),
            "targets": [p.stamp_path] if fields else [],
            "uptodate": [StampCheck(p.stamp_path, fields, why)],
            "clean": True,
        })
    groups.update(run_tasks(graph, run))
    return groups


def _prelude_tasks(groups: dict[str, list[dict]], graph: Graph, store: str | None, fresh: bool) -> SharedFlag | None:
    """`prelude:` per precompiled prelude (in the store `store`; None: off; `fresh`: each built again); the run's
    flag raised once a precompiled header was dropped (made before any -j worker forks)."""
    if not store or not graph.preludes.units:
        return None
    from ..compile.prelude_actions import PreludeCheck, run_prelude
    from ..core.shared_flag import SharedFlag

    dropped = SharedFlag()
    for u in graph.preludes.units:
        groups[stages.PRELUDE].append({
            "name": u.task.partition(":")[2],
            "doc": f"precompiled prelude of {sum(1 for _, t in graph.preludes.used_by if t == u.task)} kernels",
            "actions": [(run_prelude, [u, store, fresh])],
            "uptodate": [PreludeCheck(u, store, fresh)],
        })
    return dropped


def _dispatch_order(graph: Graph, p, preludes: bool) -> list[str]:
    """The sub-build's units and steps, as the stamp waits for them: with preludes, the first kernel of each
    prelude first, so a cold -j build starts the preludes (its setup tasks) before the other kernels (a unit
    with no setup task, the orchestration, still takes the first free worker: doit judges the others first)."""
    names = [u.task for u in (*p.units, *p.steps)]
    if not preludes:
        return names
    firsts = graph.preludes.firsts
    return [*(n for n in names if n in firsts), *(n for n in names if n not in firsts)]


def _pto_tasks(groups: dict[str, list[dict]], graph: Graph) -> dict[str, list[str]]:
    """`ptoas:` and `splice:` per `.pto` unit; the splice tasks of each sub-build (its compiles wait for them).
    The `.pto` stage's code is loaded only for directories that have one."""
    from ..pto import PtoasCheck, SpliceCheck, adopt_splice, record_adopted, record_seen, run_ptoas, run_splice

    splices: dict[str, list[str]] = {}
    for u in graph.pto.units:
        groups[stages.PTOAS].append({
            "name": u.name,
            "doc": f"ptoas {u.pto} -> {u.raw}",
            "actions": [(run_ptoas, [u])],
            "file_dep": [u.pto],
            "targets": [u.raw],
            "uptodate": [PtoasCheck(u.pto, u.raw, u.ptoas_key, partial(record_seen, u))],
        })
        groups[stages.SPLICE].append({
            "name": u.name,
            "doc": f"splice the body of {u.raw} into the kernel files it defines",
            "actions": [(run_splice, [u])],
            "task_dep": [stages.task(stages.PTOAS, u.name)],
            "uptodate": [SpliceCheck(u.raw, stages.task(stages.PTOAS, u.name), partial(adopt_splice, u),
                                     partial(record_adopted, u))],
        })
        splices.setdefault(u.sub_rel, []).append(stages.task(stages.SPLICE, u.name))
    return splices
