"""pypto_build: incremental, content-hashed builds of PyPTO build directories on doit.

Importing the package is cheap: the engine (doit) loads only when a build runs.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "build", "BuildResult", "UnitResult", "BuildError", "PyptoBuildError"]


def __getattr__(name: str):
    if name in ("build", "BuildResult", "UnitResult"):
        from . import api
        return getattr(api, name)
    if name in ("BuildError", "PyptoBuildError"):
        from . import errors
        return getattr(errors, name)
    raise AttributeError(f"module 'pypto_build' has no attribute {name!r}")
