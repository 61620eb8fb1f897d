"""Wire the stages into doit task dicts: the only module that knows them all.

Per sub-build: one `compile:` task per kernel, one `orch:` task per
orchestration, and one `stamp:` task that writes cache/binary_context.json
after all of them. Task dicts are plain data plus module-level actions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from functools import partial

from . import stages
from .compile_actions import run_compile, run_stamp
from .uptodate import PtoasCheck, SpliceCheck, StampCheck, UnitCheck, VerdictCheck
from .header_sets import SetChecker
from .layout import BuildKind, Layout
from .pto.actions import adopt_splice, record_adopted, run_ptoas, run_splice
from .pto.plan import PtoOptions, PtoPlan, plan_pto
from .run.tasks import run_replay, run_validate
from .runconfig import RunConfig
from .toolchain import Platform
from .units import SubBuildPlan, plan

if TYPE_CHECKING:
    from .cache.remote import Remote

DEFAULT_TASKS = (stages.STAMP,)


@dataclass(frozen=True)
class Graph:
    layout: Layout
    platform: Platform
    plans: tuple[SubBuildPlan, ...]
    pto: PtoPlan
    run: RunConfig
    cache_dir: str | None = None        # artefact cache (absolute), or None
    remote_cache: Remote | None = None  # the run's Bazel-HTTP remote cache (None when absent or unreachable)
    run_timeout: float = 1800.0         # seconds a replay/validate run may take
    planned_ns: int = 0                 # time.time_ns() before planning read anything (noop.record's reference)

    def unknown_identities(self) -> list[str]:
        """One line per distinct reason an identity is unknown."""
        seen: list[str] = []
        for p in self.plans:
            why = p.context.unknown
            if why and why not in seen:
                seen.append(why)
        return seen

    @property
    def compile_tasks(self) -> list[str]:
        return [u.task for p in self.plans for u in p.units]


def build_graph(layout: Layout, platform: Platform, pto: PtoOptions | None = None,
                run: RunConfig | None = None, cache_dir: str | None = None, remote_cache: Remote | None = None,
                run_timeout: float = 1800.0, planned_ns: int = 0) -> Graph:
    return Graph(layout, platform, tuple(plan(layout, platform)), plan_pto(layout, pto or PtoOptions()),
                 run or RunConfig(), cache_dir, remote_cache, run_timeout, planned_ns)


@dataclass(frozen=True)
class RunTarget:
    """Something replay/validate can run: the L2 root, the L3 root, or a sub-build with a golden.py."""

    name: str               # task-name label
    rel: str                # directory relative to the build root
    stamps: tuple[str, ...]  # stamp tasks that must be done first
    inputs: tuple[str, ...]  # files a validation verdict depends on


def run_targets(graph: Graph) -> list[RunTarget]:
    layout = graph.layout
    if layout.kind is BuildKind.MULTI_ORCH:
        chosen = [p for p in graph.plans if (p.sub.path / "golden.py").is_file()]
        return [_target(p.sub.name, p.sub.rel, [p], layout.root) for p in chosen]
    extra = ["orchestration/host_orch.py", "distributed_meta.json"] if layout.kind is BuildKind.L3 else []
    return [_target(".", ".", list(graph.plans), layout.root, extra)]


def _target(name: str, rel: str, plans: list[SubBuildPlan], root, extra: list[str] = ()) -> RunTarget:
    base = root if rel == "." else root / rel
    inputs = [u.output for p in plans for u in p.units]
    inputs += [_join(p.sub.rel, "kernel_config.py") for p in plans] + [_join(rel, e) for e in extra]
    if (base / "golden.py").is_file():
        inputs.append(_join(rel, "golden.py"))
    if (base / "data").is_dir():
        # Everything but directories: a FIFO or device there is an input too (stale, refused by the run).
        inputs += sorted(_join(rel, f.relative_to(base).as_posix()) for f in (base / "data").rglob("*")
                         if f.exists() and not f.is_dir())
    return RunTarget(name, rel, tuple(stages.task(stages.STAMP, p.sub.name) for p in plans), tuple(inputs))


def task_dicts(graph: Graph) -> dict[str, list[dict]]:
    """doit task dicts grouped by basename (`ptoas`, `splice`, `compile`, `orch`, `stamp`, `replay`, `validate`)."""
    groups: dict[str, list[dict]] = {stage: [] for stage in stages.ALL}
    splices: dict[str, list[str]] = {}
    for u in graph.pto.units:
        groups[stages.PTOAS].append({
            "name": u.name,
            "doc": f"ptoas {u.pto} -> {u.raw}",
            "actions": [(run_ptoas, [u])],
            "file_dep": [u.pto],
            "targets": [u.raw],
            "uptodate": [PtoasCheck(u.pto, u.raw, u.ptoas_key)],
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
    compiler_id = graph.platform.compiler.identity
    sets = SetChecker()                   # headers outside the build dir: each shared set checked once per run
    for p in graph.plans:
        ctx, why = p.context.digest, p.context.unknown
        for unit in p.units:
            base, _, name = unit.task.partition(":")
            groups[base].append({
                "task_dep": splices.get(unit.sub_rel, []) if unit.kind == "kernel" else [],
                "name": name,
                "doc": f"{unit.kind} {unit.source} -> {unit.output}",
                "actions": [(run_compile, [unit, compiler_id, ctx, graph.cache_dir, graph.remote_cache])],
                "file_dep": [unit.source],
                "targets": [unit.output],
                "uptodate": [UnitCheck(unit.argv_key, compiler_id, ctx, why, unit.output, sets)],
                "clean": True,
                "meta": {"unit": unit},
            })
        stamp = None if why else p.context.stamp()
        groups[stages.STAMP].append({
            "name": p.sub.name,
            "doc": f"binary context stamp of {p.sub.rel}",
            "actions": [(run_stamp, [p.stamp_path, stamp, why])],
            "task_dep": [u.task for u in p.units],
            "targets": [p.stamp_path] if stamp else [],
            "uptodate": [StampCheck(p.stamp_path, stamp, why)],
            "clean": True,
        })
    for target in run_targets(graph):
        _run_tasks(groups, graph, target)
    return groups


def _run_tasks(groups: dict[str, list[dict]], graph: Graph, t: RunTarget) -> None:
    """`replay:<name>` (always runs when selected) and `validate:<name>` (verdict cached)."""
    groups[stages.REPLAY].append({
        "name": t.name,
        "doc": f"run {t.rel} on golden.py's inputs (host runtime)",
        "actions": [(run_replay, [t.rel, graph.run, graph.run_timeout])],
        "task_dep": list(t.stamps),
        "uptodate": [False],
        "verbosity": 2,
    })
    groups[stages.VALIDATE].append({
        "name": t.name,
        "doc": f"validate {t.rel} against golden.py (verdict kept while inputs are unchanged)",
        "actions": [(run_validate, [t.rel, graph.run, graph.run_timeout])],
        "task_dep": list(t.stamps),
        "file_dep": list(t.inputs),
        "uptodate": [VerdictCheck(graph.run.key())],
        "verbosity": 2,
    })


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"
