"""`pypto-build bisect`: which units make two variants of a program differ.

Door: `read_dump` / `Dump` / `Task` / `Arg` (an argument dump of either runtime, simpler's format: `dump`),
`compare` / `TraceResult` / `Divergence` / `Parting` / `Uncompared` (the first task whose outputs differ between
two dumps: `trace`), `kernel_map` / `KernelInfo` (func_id -> kernel name, source, signature: `kernels`).
Modules: `dump`, `trace`, `kernels`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
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
