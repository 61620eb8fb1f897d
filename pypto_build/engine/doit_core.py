"""doit's engine without its command layer: `doit.runner`, `doit.task`, ... without `doit/__init__.py`.

doit's package `__init__` imports its whole command line first — every command,
the plugin loader with `importlib.metadata`, the Python API — about a tenth of
a one-edit rebuild that needs only the runner, the task control, tasks and the
dependency manager. `use_core()` registers the package without running its
`__init__` (what `importlib.util.module_from_spec` makes: name, path, spec),
so `import doit.runner` loads `doit/runner.py` and what it imports, nothing
else. The package stays whole for everyone else in the process: a submodule
asked for by name (`from doit import loader`) is imported, and the first use of
any other name (`doit.run`, `doit.get_var`, `doit.__version__`) runs the real
`__init__` then, into the same module object. A process that imported doit
before is left as it is.

Standard modules those engine modules import for what a one-process build
never does are deferred (`DEFERRED`, ~11 ms of every run): `pdb` (doit.action,
for `--pdb`), `hashlib` (doit.dependency, the md5 of a string result; loading
it starts OpenSSL), `dbm` (doit.dependency, the dbm state backend) and
`multiprocessing` (doit.runner, for `-j`: its `Process` and `Queue`, which
doit.runner binds at import, are stand-ins that import it when first called).
Only in `pypto-build`'s own process (`own_process()`, called by `cli.entry`), never
in a library caller's. Until first use each is a placeholder module in `sys.modules` (`deferred()`
tells one); the first attribute asked of it imports the real module, which
takes its place (and lends the placeholder its names), so every user gets the
real thing.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types

_lock = threading.RLock()


def use_core() -> None:
    """Register `doit` without running its `__init__` (no-op when it is imported already or absent)."""
    with _lock:
        if "doit" in sys.modules:
            return
        spec = importlib.util.find_spec("doit")
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return                                  # the real import says what is wrong
        package = importlib.util.module_from_spec(spec)
        package.__getattr__ = _completing(package, spec)
        sys.modules["doit"] = package
        if _own_process:
            for name, stand_ins in DEFERRED.items():
                _defer(name, stand_ins)


def own_process() -> None:
    """This process is `pypto-build` itself (`cli.entry`): only our code and doit's run in it, so the
    standard modules below may be deferred. A library caller's process never is: its own code would
    see the placeholders (a `class P(multiprocessing.Process)` would subclass a stand-in function)."""
    global _own_process
    _own_process = True


_own_process = False


# module -> the callables a `from module import ...` of doit's binds at import (stand-ins until first call)
DEFERRED: dict[str, tuple[str, ...]] = {"pdb": (), "hashlib": (), "dbm": (), "multiprocessing": ("Process", "Queue")}


def deferred(module: object) -> bool:
    """Whether `module` is a placeholder `use_core` left in `sys.modules` (its real module not loaded yet)."""
    return bool(getattr(module, "__deferred__", False))


def realize(name: str) -> None:
    """Load deferred module `name` now (a `-j` run is about to use multiprocessing through doit's runner)."""
    module = sys.modules.get(name)
    if deferred(module):
        module.__realize__()


def _defer(name: str, stand_ins: tuple[str, ...]) -> None:
    """A placeholder for standard module `name` until an attribute of it is first asked for (or one of its
    `stand_ins` called)."""
    if name in sys.modules:
        return
    placeholder = types.ModuleType(name, f"{name}, imported on first use (pypto_build.engine.doit_core)")

    def load():
        with _lock:
            if sys.modules.get(name) is placeholder:
                del sys.modules[name]
            real = importlib.import_module(name)
            placeholder.__dict__.update({k: v for k, v in real.__dict__.items() if k != "__getattr__"})
            placeholder.__deferred__ = False
            placeholder.__realize__ = lambda: real
        return real

    def __getattr__(attr: str):
        return getattr(load(), attr)

    def stand_in(attr: str):
        def call(*args, **kwargs):
            return getattr(load(), attr)(*args, **kwargs)
        call.__name__ = call.__qualname__ = attr
        return call

    placeholder.__getattr__ = __getattr__
    placeholder.__realize__ = load
    placeholder.__deferred__ = True
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.submodule_search_locations is not None:
        # a package: `from multiprocessing import Process` asks for __path__ first; answering it does not load
        placeholder.__path__ = list(spec.submodule_search_locations)
    for attr in stand_ins:
        setattr(placeholder, attr, stand_in(attr))
    sys.modules[name] = placeholder


def _completing(package, spec):
    """The package's `__getattr__` until its `__init__` ran: a submodule by name, else the whole package."""
    done = False

    def __getattr__(name: str):
        nonlocal done
        if not name.startswith("__") and importlib.util.find_spec(f"doit.{name}") is not None:
            return importlib.import_module(f"doit.{name}")
        with _lock:
            if not done:
                done = True
                spec.loader.exec_module(package)    # doit's own __init__, into this module object
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'doit' has no attribute {name!r}") from None

    return __getattr__
