"""The run stage's doit task dicts: per run target a `replay:` and a `validate:` task.

`replay:<name>` always runs when selected (its output is what the user wants to
see); `validate:<name>` keeps its verdict while `VerdictCheck` says it holds.
Task dicts are plain data plus module-level actions (picklable for `-j`).
"""
from __future__ import annotations

from dataclasses import replace

from ..core import stages
from ..plan.graph import Graph, RunTarget, run_targets
from ..builddir.runconfig import RunSpec
from .actions import run_replay, run_validate
from .checks import VerdictCheck


def task_dicts(graph: Graph, run: RunSpec) -> dict[str, list[dict]]:
    """`replay` and `validate` task dicts of every run target of `graph`, by basename."""
    groups: dict[str, list[dict]] = {stages.REPLAY: [], stages.VALIDATE: []}
    # a run goes to the platform the graph was planned for (and a verdict is kept per platform)
    run = replace(run, config=replace(run.config, platform=graph.platform.name))
    for target in run_targets(graph):
        _target_tasks(groups, run, target, str(graph.layout.root / target.rel))
    return groups


def _target_tasks(groups: dict[str, list[dict]], run: RunSpec, t: RunTarget, sub: str) -> None:
    """`replay:<name>` (always runs when selected) and `validate:<name>` (verdict cached)."""
    groups[stages.REPLAY].append({
        "name": t.name,
        "doc": f"run {t.rel} on golden.py's inputs ({run.config.platform})",
        "actions": [(run_replay, [t.rel, run.config, run.timeout, run.quiet])],
        "task_dep": list(t.stamps),
        "uptodate": [False],
        "verbosity": 2,
    })
    groups[stages.VALIDATE].append({
        "name": t.name,
        "doc": f"validate {t.rel} against golden.py (verdict kept while inputs are unchanged)",
        "actions": [(run_validate, [t.rel, run.config, run.timeout, run.quiet])],
        "task_dep": list(t.stamps),
        "file_dep": list(t.inputs),
        "uptodate": [VerdictCheck(run.config.key(), sub)],
        "verbosity": 2,
    })


