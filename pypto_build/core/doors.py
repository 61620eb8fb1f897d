"""Doors: a family folder's `__init__` names what it offers; the module behind a name loads on first use.

PEP 562 `__getattr__`, so entering a family costs nothing until a name is used
(the no-op path must not import doit, a replay must not import the compilers'
code). Outside a family, code imports only the names its door lists
(`tests/test_imports.py` checks it).
"""
from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: importing `collections` would cost every run's start
    from collections.abc import Callable


def door(package: str, exports: dict[str, str], modules: tuple[str, ...] = ()) -> Callable[[str], object]:
    """The `__getattr__` of `package`: `exports` maps each public name to the module (relative) defining
    it; `modules` are submodules offered whole (used as a namespace: `noop.check`, `noop.key`)."""
    def __getattr__(name: str) -> object:
        if name in modules:
            return importlib.import_module(f".{name}", package)
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{module}", package), name)
    return __getattr__
