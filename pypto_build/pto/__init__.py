"""The `.pto` stage: ptoas regenerates kernel bodies from edited `ptoas/*.pto` files and splices them in.

Door: `plan_pto` / `pto_options` / `PtoOptions` / `PtoPlan` (planning), `find_ptoas`
(the tool), the task actions and `uptodate` checks, `STAGE` (the stage as the engine assembles it: its
tasks, report and explain rules) and `unapplied_sources` (the `.pto` edits a run did not apply).
Modules: `ptoas` (finding and running ptoas), `plan` (the units), `actions` (ptoas and splice tasks),
`splice` (the text splice), `checks` (the `uptodate` checks), `stage`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "PtoOptions": "plan",
    "PtoPlan": "plan",
    "plan_pto": "plan",
    "pto_options": "plan",
    "find_ptoas": "ptoas",
    "identity_files": "ptoas",
    "run_ptoas": "actions",
    "run_splice": "actions",
    "adopt_splice": "actions",
    "record_adopted": "actions",
    "record_seen": "actions",
    "PtoasCheck": "checks",
    "SpliceCheck": "checks",
    "STAGE": "stage",
    "unapplied_sources": "stage",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
