"""pypto_build: incremental, content-hashed builds of PyPTO build directories on doit.

Importing the package is cheap: doit loads only when a build runs, torch only
when a program runs.
"""
from __future__ import annotations

from .core.doors import door

__version__ = "0.1.0"

_EXPORTS = {
    "build": "api", "validate": "api", "BuildResult": "api", "UnitResult": "api",
    "BuildError": "errors", "PyptoBuildError": "errors", "UserError": "errors", "Failure": "errors",
    "replay": "compat", "ReplayResult": "compat", "RunConfig": "builddir.runconfig",
    "CompiledProgram": "compat", "BenchmarkStats": "compat", "benchmark": "compat",
    "write_run_script": "compat",
    "shard_plan": "ci.shards", "ShardPlan": "ci.shards", "merge_reports": "ci.report", "MergedReport": "ci.report",
    "DistributedCompiledProgram": "compat", "DistributedConfig": "compat",
    "bisect": "culprits",
    "rebuild_kernel_cpp_from_pto": "compat", "invalidate_binary_cache": "compat", "ArgumentError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__ = door(__name__, _EXPORTS)
