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

The standard modules doit's engine imports for features a build never uses (`pdb`, `hashlib`,
`dbm`, `multiprocessing` without -j; ~8 ms) are imported as usual: replacing standard modules in
`sys.modules` would change them for a library caller's own code too.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading

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
