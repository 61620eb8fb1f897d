"""Running a built directory: the program in a child process, golden inputs and the comparison.

Door: `check_replayable` / `execute` (running a built directory), `run_program`
(the parent side of the child process: golden -> execute -> save -> compare),
`run_replay` / `run_validate` (the doit actions of `replay:` and `validate:`; `Refused`: their
failure when the child refused its input, a user error),
`VerdictCheck` (when a verdict still holds), `task_dicts` (the stage's doit tasks), `STAGE` (the
stage as the engine assembles it: tasks, the kept verdict's line `KEPT_VERDICT`, explain's words),
`require_fit` (the caller's tensors against the sidecar), `WarmStarter` (runs forked from a server that imported torch once: `watch`).
Modules: `arguments`, `execution`, `child`, `starter`, `warm_server`, `golden`, `golden_key`,
`golden_cache`, `reads`, `actions`, `checks`, `tasks`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "check_replayable": "execution",
    "execute": "execution",
    "save_outputs": "execution",
    "run_program": "child",
    "WarmStarter": "starter",
    "run_replay": "actions",
    "run_validate": "actions",
    "Refused": "actions",
    "require_fit": "arguments",
    "VerdictCheck": "checks",
    "task_dicts": "tasks",
    "STAGE": "tasks",
    "KEPT_VERDICT": "tasks",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
