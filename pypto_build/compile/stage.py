"""The compile stage as the engine assembles it: three `Stage`s — preludes, compile units, stamps.

`prelude:` per precompiled prelude (built before the kernels using it, as their doit `setup` task);
per sub-build `compile:` per kernel and `orch:` per orchestration (with a device kernel's `link:` and
`extract:` steps after it), then one `stamp:` that writes cache/binary_context.json after all of them.
A kernel waits for its sub-build's `splice:` tasks (the `.pto` stage's, named by `core/stages`). Task dicts
are plain data plus module-level actions (picklable for `-j`): the contract with doit.
"""
from __future__ import annotations

from ..core import stages
from ..core.stage_seam import Done, Seen, Stage
from ..builddir.state_dir import current_state_folder
from .actions import run_compile, run_stamp
from .checks import StampCheck, StepCheck, UnitCheck
from .command import unit_launcher
from .header_sets import SetChecker
from .steps import run_step

UNIT_GROUPS = (stages.COMPILE, stages.ORCH)             # one compile unit each: a kernel, an orchestration


def prelude_tasks(graph, caches, _run=None) -> dict[str, list[dict]]:
    """`prelude:` per precompiled prelude (in the store `caches.preludes`; None: off; `fresh_preludes`: each
    built again)."""
    found: list[dict] = []
    store, fresh = caches.preludes, caches.fresh_preludes
    if store and graph.preludes.units:
        from .prelude_actions import PreludeCheck, run_prelude
        for u in graph.preludes.units:
            found.append({
                "name": u.task.partition(":")[2],
                "doc": f"precompiled prelude of {sum(1 for _, t in graph.preludes.used_by if t == u.task)} kernels",
                "actions": [(run_prelude, [u, store, fresh])],
                "uptodate": [PreludeCheck(u, store, fresh)],
            })
    return {stages.PRELUDE: found}


def unit_tasks(graph, caches, _run=None) -> dict[str, list[dict]]:
    """`compile:`/`orch:` per compile unit and `link:`/`extract:` per step of every sub-build."""
    groups: dict[str, list[dict]] = {g: [] for g in COMPILE.groups}
    splices: dict[str, list[str]] = {}
    for u in graph.pto.units:                   # a sub-build's kernels wait for its splices
        splices.setdefault(u.sub_rel, []).append(stages.task(stages.SPLICE, u.name))
    folder = current_state_folder(graph.layout.root, graph.platform.name)     # the platform's own state
    sets = SetChecker(folder)             # headers outside the build dir: each shared set checked once per run
    dropped = _dropped_flag(graph, caches.preludes)
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
    return groups


def _dropped_flag(graph, store: str | None):
    """The run's flag raised once a precompiled header was dropped (made before any -j worker forks); None
    when no prelude is built."""
    if not store or not graph.preludes.units:
        return None
    from ..core.shared_flag import SharedFlag
    return SharedFlag()


def stamp_tasks(graph, caches, _run=None) -> dict[str, list[dict]]:
    """`stamp:` per sub-build: writes its binary context after every unit and step of it."""
    found: list[dict] = []
    for p in graph.plans:
        why = p.context.unknown
        fields = None if why else p.context.stamp_fields()
        found.append({
            "name": p.sub.name,
            "doc": f"binary context stamp of {p.sub.rel}",
            "actions": [(run_stamp, [p.stamp_path, fields, why])],
            "task_dep": _dispatch_order(graph, p, bool(caches.preludes)),
            "targets": [p.stamp_path] if fields else [],
            "uptodate": [StampCheck(p.stamp_path, fields, why)],
            "clean": True,
        })
    return {stages.STAMP: found}


def _dispatch_order(graph, p, preludes: bool) -> list[str]:
    """The sub-build's units and steps, as the stamp waits for them: with preludes, the first kernel of each
    prelude first, so a cold -j build starts the preludes (its setup tasks) before the other kernels (a unit
    with no setup task, the orchestration, still takes the first free worker: doit judges the others first)."""
    names = [u.task for u in (*p.units, *p.steps)]
    if not preludes:
        return names
    firsts = graph.preludes.firsts
    return [*(n for n in names if n in firsts), *(n for n in names if n not in firsts)]


def unit_done(name: str, values: dict) -> Done:
    """A compile unit that built the very bytes already in place: its file kept (the summary says so)."""
    kept = values.get("kept") == "identical" and name.startswith(stages.UNITS)
    return Done({"identical": (name,)} if kept else {})


def unit_summary(seen: Seen) -> list[tuple[int, str]]:
    """`N compiled[, N from cache], N up to date`, and, last, the units recompiled to identical bytes."""
    parts = [(0, f"{len(seen.names('ran', stages.UNITS))} compiled")]
    cached = len(seen.names("from-cache", stages.UNITS))
    if cached:
        parts.append((0, f"{cached} from cache"))
    parts.append((0, f"{len(seen.names('up-to-date', stages.UNITS))} up to date"))
    identical = seen.tallied("identical")
    if identical:           # last: `ls -l` shows these files untouched (atomic.install kept them)
        parts.append((3, f"{len(identical)} recompiled, identical bytes kept"))
    return parts


def last_run(values: dict) -> str:
    """How a kernel last compiled, when its graph planned a precompiled prelude: "with prelude:<name>" or
    "plainly: <why>" ("": not said)."""
    how = values.get("prelude")
    return how if isinstance(how, str) else ""


def no_preludes_line(graph, items) -> str | None:
    """For `explain --all`: why no built kernel says how it last compiled, when the platform offers no
    precompiled prelude here (host without PTO_ISA_ROOT, say); None when it offers them or nothing is built."""
    built = any(e.task.startswith(stages.prefix(stages.COMPILE)) and e.status == "up-to-date" for e in items)
    if not built or any(e.how for e in items) or graph.platform.facts.no_preludes is None:
        return None
    return (f"pypto-build: no precompiled preludes on {graph.platform.name} here, so no kernel says how it last "
            f"compiled: {graph.platform.facts.no_preludes}")


def stamp_done(name: str, values: dict) -> Done:
    """A stamp that wrote binary_context.json, or that ran and wrote none (an identity unknown)."""
    return Done({"stamped" if values.get("stamp") else "unstamped": (name,)})


def stamp_summary(seen: Seen) -> list[tuple[int, str]]:
    parts = []
    if seen.tallied("stamped"):
        parts.append((2, f"{len(seen.tallied('stamped'))} stamp(s) written"))
    if seen.tallied("unstamped"):
        parts.append((2, f"{len(seen.tallied('unstamped'))} sub-build(s) not stamped (identity unknown)"))
    return parts


PRELUDE = Stage(groups=(stages.PRELUDE,), tasks=prelude_tasks)
COMPILE = Stage(groups=(stages.COMPILE, stages.ORCH, stages.LINK, stages.EXTRACT), tasks=unit_tasks,
                units=UNIT_GROUPS, done=unit_done, summary=unit_summary, last_run=last_run)
# A compile removes the stamp, so a stamp runs after any unit of its sub-build that runs.
STAMP = Stage(groups=(stages.STAMP,), tasks=stamp_tasks, default=True, follows=(stages.STAMP,),
              done=stamp_done, summary=stamp_summary)
