"""The run stage's doit task dicts: per run target a `replay:` and a `validate:` task.

`replay:<name>` always runs when selected (its output is what the user wants to
see); `validate:<name>` keeps its verdict while `VerdictCheck` says it holds.
Task dicts are plain data plus module-level actions (picklable for `-j`; a run spec's `in_process`, which is
not, is refused with `-j` > 1 by `options.Request`). `STAGE` is the stage as the engine assembles it: its
tasks, the line a kept verdict says, its verdicts in explain's words.
"""
from __future__ import annotations

from ..core import stages
from ..plan.graph import Graph, RunTarget, run_targets
from ..plan.program import Program, program
from ..builddir.runconfig import RunSpec
from ..core.stage_seam import Stage
from ..variants.record import Recorder, recorder
from .actions import Refused, run_replay, run_validate
from .checks import VerdictCheck


def task_dicts(graph: Graph, run: RunSpec, cache_dir: str | None = None) -> dict[str, list[dict]]:
    """`replay` and `validate` task dicts of every run target of `graph`, by basename (`cache_dir`: the artefact
    cache's, beside which the variants a verdict records keep their binaries: `variants.store`)."""
    groups: dict[str, list[dict]] = {stages.REPLAY: [], stages.VALIDATE: []}
    for target in run_targets(graph):
        keep = recorder(graph.plans, target.rel, cache_dir)
        _target_tasks(groups, run, target, program(graph, target.rel), keep)
    return groups


def _target_tasks(groups: dict[str, list[dict]], run: RunSpec, t: RunTarget, what: Program, keep: Recorder) -> None:
    """`replay:<name>` (always runs when selected) and `validate:<name>` (verdict cached), each running `what`
    (the plan's program: its directory, kind and platform; a verdict is kept per platform and its variant
    recorded by `keep`)."""
    groups[stages.REPLAY].append({
        "name": t.name,
        "doc": f"run {t.rel} on golden.py's inputs ({what.platform})",
        "actions": [(run_replay, [what, run.config, run.timeout, run.quiet, run.in_process])],
        "task_dep": list(t.stamps),
        "uptodate": [False],
        "verbosity": 2,
    })
    groups[stages.VALIDATE].append({
        "name": t.name,
        "doc": f"validate {t.rel} against golden.py (verdict kept while inputs are unchanged)",
        "actions": [(run_validate, [what, run.config, run.timeout, run.quiet, run.in_process, keep])],
        "task_dep": list(t.stamps),
        "file_dep": list(t.inputs),
        "uptodate": [VerdictCheck(what.config(run.config).key(), str(what.path))],
        "verbosity": 2,
    })


KEPT_VERDICT = "(cached: binaries, run configuration and golden result, with all it depends on, are unchanged)"
"""What a reused verdict's line says after it (the verdict's key: `run.checks.VerdictCheck`)."""


def kept(name: str, values: dict) -> str | None:
    """The line a kept verdict says (even under -q): a `validate:` up to date."""
    if not name.startswith(stages.prefix(stages.VALIDATE)):
        return None
    return f"{name}  Golden validation: {values.get('verdict', 'PASSED')} {KEPT_VERDICT}"


def explained(name: str, status: str, reason: str, values: dict | None) -> str | None:
    """A validation in explain's words: whether its last verdict still holds (and, when not, why); not listed
    unless asked for when it never made one. A replay: its reason."""
    if not name.startswith(stages.prefix(stages.VALIDATE)):
        return reason
    verdict = (values or {}).get("verdict")
    if not verdict:
        return None
    if status == "up-to-date":
        return f"the last verdict ({verdict}) still holds"
    return f"{reason}: the last verdict ({verdict}) no longer holds"


def _tasks(graph: Graph, caches, run: RunSpec | None) -> dict[str, list[dict]]:
    return task_dicts(graph, run or RunSpec(), caches.directory if caches is not None else None)


# A verdict is on the binaries: a replay or validation runs after any stamp it depends on that runs.
STAGE = Stage(groups=(stages.REPLAY, stages.VALIDATE), tasks=_tasks, shown=(stages.VALIDATE,),
              follows=(stages.REPLAY, stages.VALIDATE), verdicts=(stages.VALIDATE,), refusal=Refused, kept=kept,
              explain=explained, forced="replay --validate makes a fresh verdict")
