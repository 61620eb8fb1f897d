"""The host runtime: runs built kernels and orchestrations on the CPU (simpler's ABI, no NPU).

Door: `HostExecutor` / `ExecutorError` (one L2 program), `run_distributed` (L3:
one worker process per device), `write_swimlane` / `write_args_dump`
(diagnostics). Modules: `executor`, `abi`, `dfx`, `l3`, `l3_shims`,
`rank_channel`; C/C++ headers under `host/`.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
    "HostExecutor": "executor",
    "ExecutorError": "executor",
    "RunTrace": "executor",
    "run_distributed": "l3",
    "write_swimlane": "dfx",
    "write_args_dump": "dfx",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
