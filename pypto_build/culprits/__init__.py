"""`pypto-build bisect`: which units make two variants of a program differ, and the first task where they part.

Door: `bisect` (the whole search, `hunt.bisect`: one `Report` per program), `Report` / `Culprit` (what it found),
`divergence_summary` (the first divergent task in one line), `METHODS`; `read_dump` / `Dump` / `Task` / `Arg` (an argument dump of either runtime, simpler's format: `dump`),
`compare` / `TraceResult` / `Divergence` / `Parting` / `Uncompared` (the first task whose outputs differ between
two dumps: `trace`), `kernel_map` / `KernelInfo` (func_id -> kernel name, source, signature: `kernels`).
Modules: `hunt` (the driver), `sides` (the two variants compared), `scratch` (the copy it works in), `runs` (one
run of a mix, judged by the oracle), `traced` (the trace step), `search` (delta debugging over the suspects),
`rebuild` (an evicted good binary built again), `dump`, `trace`, `kernels`, `report` (the answer in words and JSON).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "bisect": "hunt",
    "METHODS": "hunt",
    "Report": "report",
    "Culprit": "report",
    "divergence_summary": "report",
    "read_dump": "dump",
    "Dump": "dump",
    "Task": "dump",
    "Arg": "dump",
    "compare": "trace",
    "TraceResult": "trace",
    "Divergence": "trace",
    "Parting": "trace",
    "Uncompared": "trace",
    "kernel_map": "kernels",
    "KernelInfo": "kernels",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
