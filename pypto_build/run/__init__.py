"""Running a built directory: the program in a child process, golden inputs and the comparison.

Door: `run_built` (the one entry: every way of running a built program calls it; `Binaries`: what it
loads, `Loaded`: what an in-process run keeps loaded, `RunOutcome`: what it returns), `runnable`
(the program a planned directory runs, or why it cannot: before anything is built),
`run_replay` / `run_validate` (the doit actions of `replay:` and `validate:`; `RunFailed`: their failure,
carrying the run's typed error; `Refused`: the one when the child refused its input, a user error),
`VerdictCheck` (when a verdict still holds), `task_dicts` (the stage's doit tasks), `STAGE` (the
stage as the engine assembles it: tasks, the kept verdict's line `KEPT_VERDICT`, explain's words),
`require_fit` (the caller's tensors against the sidecar), `WarmStarter` (runs forked from a server that imported torch once: `watch`),
`RunAhead` / `Wanted` / `for_request` (runs begun while the binaries are built: golden.py's half made meanwhile),
`load_golden` / `mismatch` (golden.py's tolerances and the comparison rule, for a caller comparing two runs).
Modules: `entry`, `arguments`, `execution`, `child`, `prepare`, `ahead`, `starter`, `warm_server`, `golden`,
`golden_key`, `golden_cache`, `reads`, `actions`, `checks`, `tasks`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "run_built": "entry",
    "Binaries": "entry",
    "Loaded": "entry",
    "RunOutcome": "entry",
    "runnable": "execution",
    "RunAhead": "ahead",
    "Wanted": "ahead",
    "for_request": "ahead",
    "WarmStarter": "starter",
    "run_replay": "actions",
    "run_validate": "actions",
    "Refused": "actions",
    "RunFailed": "actions",
    "require_fit": "arguments",
    "VerdictCheck": "checks",
    "load_golden": "golden",
    "mismatch": "golden",
    "task_dicts": "tasks",
    "STAGE": "tasks",
    "KEPT_VERDICT": "tasks",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
