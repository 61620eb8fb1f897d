"""A planned `Graph` as doit task dicts: the stages the engine is given, assembled in their order.

Each stage makes its own task dicts (`Stage.tasks`: plain data plus module-level actions, picklable for
`-j`: the contract with doit) and names other stages' tasks only by name; this module names none of them.
The stages default to the build's table (`build_stages.STAGES`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..cache import Caches
from ..plan.graph import Graph
from ..builddir.runconfig import RunSpec

if TYPE_CHECKING:
    from ..core.stage_seam import Stage


def build_stages() -> tuple[Stage, ...]:
    """The build's own stages (the table lives outside the engine)."""
    from ..build_stages import STAGES
    return STAGES


def task_dicts(graph: Graph, caches: Caches | None = None, run: RunSpec | None = None,
               stages: tuple[Stage, ...] | None = None) -> dict[str, list[dict]]:
    """doit task dicts grouped by basename, every group of every stage in the stages' order (empty ones too).

    `caches`: where compiles restore from and store to (default none); `run`: how replay/validate run
    the program (default: RunConfig() and the default timeout); `stages`: default the build's.
    """
    caches, run = caches or Caches(), run or RunSpec()
    stages = build_stages() if stages is None else stages
    groups: dict[str, list[dict]] = {group: [] for stage in stages for group in stage.groups}
    for stage in stages:
        groups.update(stage.tasks(graph, caches, run))
    return groups


def default_tasks(stages: tuple[Stage, ...]) -> list[str]:
    """What a run given no task names builds: the groups of the stages that say so."""
    return [group for stage in stages if stage.default for group in stage.groups]
