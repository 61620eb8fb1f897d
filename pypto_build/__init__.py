"""pypto_build: incremental, content-hashed builds of PyPTO build directories on doit.

Importing the package is cheap: doit loads only when a build runs, torch only
when a program runs.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "build": "api", "validate": "api", "BuildResult": "api", "UnitResult": "api",
    "BuildError": "errors", "PyptoBuildError": "errors",
    "replay": "compat.replay", "ReplayResult": "compat.replay", "RunConfig": "runconfig",
    "CompiledProgram": "compat.program", "BenchmarkStats": "compat.program", "benchmark": "compat.program",
    "write_run_script": "compat.runner",
    "DistributedCompiledProgram": "compat.program_l3", "DistributedConfig": "compat.program_l3",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pypto_build' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
