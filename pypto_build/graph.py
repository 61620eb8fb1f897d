"""Wire the stages into doit task dicts: the only module that knows them all.

Per sub-build: one `compile:` task per kernel, one `orch:` task per
orchestration, and one `stamp:` task that writes cache/binary_context.json
after all of them. Task dicts are plain data plus module-level actions.
"""
from __future__ import annotations

from dataclasses import dataclass

from functools import partial

from .actions import run_compile, run_stamp
from .checks import PtoasCheck, SpliceCheck, StampCheck, UnitCheck
from .layout import Layout
from .pto_actions import adopt_splice, run_ptoas, run_splice
from .pto_plan import PtoOptions, PtoPlan, plan_pto
from .toolchain import Platform
from .units import SubBuildPlan, plan

DEFAULT_TASKS = ("stamp",)


@dataclass(frozen=True)
class Graph:
    layout: Layout
    platform: Platform
    plans: tuple[SubBuildPlan, ...]
    pto: PtoPlan

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


def build_graph(layout: Layout, platform: Platform, pto: PtoOptions | None = None) -> Graph:
    return Graph(layout, platform, tuple(plan(layout, platform)), plan_pto(layout, pto or PtoOptions()))


def task_dicts(graph: Graph) -> dict[str, list[dict]]:
    """doit task dicts grouped by basename (`ptoas`, `splice`, `compile`, `orch`, `stamp`)."""
    groups: dict[str, list[dict]] = {"ptoas": [], "splice": [], "compile": [], "orch": [], "stamp": []}
    splices: dict[str, list[str]] = {}
    for u in graph.pto.units:
        groups["ptoas"].append({
            "name": u.name,
            "doc": f"ptoas {u.pto} -> {u.raw}",
            "actions": [(run_ptoas, [u])],
            "file_dep": [u.pto],
            "targets": [u.raw],
            "uptodate": [PtoasCheck(u.pto, u.raw, u.ptoas_key)],
        })
        groups["splice"].append({
            "name": u.name,
            "doc": f"splice the body of {u.raw} into the kernel files it defines",
            "actions": [(run_splice, [u])],
            "task_dep": [f"ptoas:{u.name}"],
            "uptodate": [SpliceCheck(u.raw, partial(adopt_splice, u), u.record)],
        })
        splices.setdefault(u.sub_rel, []).append(f"splice:{u.name}")
    compiler_id = graph.platform.compiler.identity
    for p in graph.plans:
        ctx, why = p.context.digest, p.context.unknown
        for unit in p.units:
            base, _, name = unit.task.partition(":")
            groups[base].append({
                "task_dep": splices.get(unit.sub_rel, []) if unit.kind == "kernel" else [],
                "name": name,
                "doc": f"{unit.kind} {unit.source} -> {unit.output}",
                "actions": [(run_compile, [unit, compiler_id, ctx])],
                "file_dep": [unit.source],
                "targets": [unit.output],
                "uptodate": [UnitCheck(unit.argv_key, compiler_id, ctx, why, unit.output)],
                "clean": True,
                "meta": {"unit": unit},
            })
        stamp = None if why else p.context.stamp()
        groups["stamp"].append({
            "name": p.sub.name,
            "doc": f"binary context stamp of {p.sub.rel}",
            "actions": [(run_stamp, [p.stamp_path, stamp, why])],
            "task_dep": [u.task for u in p.units],
            "targets": [p.stamp_path] if stamp else [],
            "uptodate": [StampCheck(p.stamp_path, stamp, why)],
            "clean": True,
        })
    return groups
