"""pypto_build: incremental, content-hashed builds of PyPTO build directories on doit.

Importing the package is cheap: the engine (doit) loads only when a build runs.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "build", "BuildResult", "UnitResult", "BuildError", "PyptoBuildError",
           "CompiledProgram", "BenchmarkStats", "benchmark", "write_run_script"]


def __getattr__(name: str):
    if name in ("build", "BuildResult", "UnitResult"):
        from . import api
        return getattr(api, name)
    if name in ("BuildError", "PyptoBuildError"):
        from . import errors
        return getattr(errors, name)
    if name in ("CompiledProgram", "BenchmarkStats", "benchmark"):
        from . import program
        return getattr(program, name)
    if name == "write_run_script":
        from . import runner_script
        return runner_script.write_run_script
    raise AttributeError(f"module 'pypto_build' has no attribute {name!r}")
