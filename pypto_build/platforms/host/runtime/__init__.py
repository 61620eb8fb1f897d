"""The host runtime, and the one L3 driver every runtime runs under.

Door: `HostExecutor` / `ExecutorError` (one L2 program on the CPU), `run_l3` / `L3Backend` / `Prepared` (the L3
driver and its backend seam; `TENSOR_ARG`, the module a backend's `make_tensor_arg` stands in
for), `HostL3` (the host runtime's backend: one worker process per device),
`write_swimlane` / `write_args_dump` (a host run's diagnostics), `dfx_snapshot` / `changed_files` (what a run
wrote under dfx_outputs). Modules: `executor`, `abi`, `dfx`, `l3_driver`, `l3`, `l3_shims` (the stand-ins for
the modules a host driver imports: the only module that replaces `sys.modules` entries), `rank_channel`;
C/C++ headers under `host/`.
"""
from __future__ import annotations

from ....core.doors import door

_EXPORTS = {
    "HostExecutor": "executor",
    "ExecutorError": "executor",
    "RunTrace": "executor",
    "HostL3": "l3",
    "write_swimlane": "dfx",
    "write_args_dump": "dfx",
    "dfx_snapshot": "dfx",
    "changed_files": "dfx",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
