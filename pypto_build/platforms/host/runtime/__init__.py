"""The host runtime: a functional CPU reference of PyPTO's runtime.

Door: `HostExecutor` / `ExecutorError` (one L2 program on the CPU), `HostL3` (the host runtime's backend
of the L3 driver, `platforms/l3_driver.py`: one worker process per device), `write_swimlane` /
`write_args_dump` / `payloads_wanted` (a host run's diagnostics; the dump in simpler's format).
Modules: `executor`, `abi`, `trace`, `capture`, `dfx`, `l3`, `rank_channel`; its C/C++ headers are
`platforms/host/headers/`.
"""
from __future__ import annotations

from ....core.doors import door

_EXPORTS = {
    "HostExecutor": "executor",
    "ExecutorError": "executor",
    "RunTrace": "trace",
    "HostL3": "l3",
    "write_swimlane": "dfx",
    "write_args_dump": "dfx",
    "payloads_wanted": "dfx",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
