"""PyPTO-compatible entry points: what a PyPTO user calls, with PyPTO's names and behaviour.

Door: `replay` / `ReplayResult` (PyPTO's replay), `CompiledProgram`,
`DistributedCompiledProgram` (the objects `ir.compile()` returns), `benchmark`,
`rebuild_kernel_cpp_from_pto` / `invalidate_binary_cache` (the steps of PyPTO's
benchmarking recipe), and the `debug/run.py` writer (`write_run_script`,
`emit_runner_command`). Modules: `pypto_replay`, `program`, `program_l3`,
`recipe`, `runner` (writes debug/run.py), `runner_main` (what debug/run.py runs).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "replay": "pypto_replay",
    "ReplayResult": "pypto_replay",
    "CompiledProgram": "program",
    "BenchmarkStats": "program",
    "benchmark": "program",
    "DistributedCompiledProgram": "program_l3",
    "DistributedConfig": "program_l3",
    "rebuild_kernel_cpp_from_pto": "recipe",
    "invalidate_binary_cache": "recipe",
    "write_run_script": "runner",
    "add_emit_runner_arguments": "runner",
    "emit_runner_command": "runner",
    "interpreter": "runner",
}
_MODULES = ('runner_main',)

__all__ = [*_EXPORTS, *_MODULES]
__getattr__ = door(__name__, _EXPORTS, _MODULES)
