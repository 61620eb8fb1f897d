"""Whether simpler (PyPTO's runtime) is importable by this Python, and where it is installed. Light
(importlib.util, os, sys): the platform choice asks, and so does the console script's no-op answer."""
from __future__ import annotations

import importlib.util
import os
import sys

from ..errors import ToolchainError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

SIMPLER_MODULES = ("simpler", "simpler_setup", "_task_interface")   # what a simpler install provides
PTO_ISA_TREE = os.path.join("build", "pto-isa")      # simpler's managed PTO-ISA tree, under the project root


def simpler_missing() -> str | None:
    """Why simpler cannot serve here (a module it provides is not importable), or None. Imports nothing."""
    for name in SIMPLER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"PyPTO's runtime simpler is not installed for {sys.executable} (module {name} not "
                    "importable): install simpler into this Python (pip install --no-build-isolation "
                    "<simpler checkout>) or run pypto_build with the Python that has it")
    return None


def install_places() -> tuple[str, str]:
    """(project_root, setup_dir) of the simpler install this Python would use, resolved, asking neither git
    nor simpler (planning and the no-op key ask it); ToolchainError when there is none.

    `project_root` as `simpler_setup/environment.py` decides it: its folder's `_assets/` when that holds
    `src/` (a wheel), else the folder above it (a checkout); `setup_dir` the folder of
    `simpler_setup/kernel_compiler.py` (its `incore/` is on every kernel's path).
    """
    why = simpler_missing()
    if why:
        raise ToolchainError(why)
    spec = importlib.util.find_spec("simpler_setup")
    assert spec is not None     # simpler_missing() said so
    here = os.path.dirname(os.path.realpath(_module_file("environment", spec)))
    assets = os.path.join(here, "_assets")
    root = assets if os.path.isdir(os.path.join(assets, "src")) else os.path.dirname(here)
    return root, os.path.dirname(os.path.realpath(_module_file("kernel_compiler", spec)))


def _module_file(name: str, package: ModuleSpec) -> str:
    """The file `import <package>.<name>` would load, asked of the import system without importing the package."""
    full = f"{package.name}.{name}"
    origin = getattr(sys.modules.get(full), "__file__", None)
    if origin is None:
        path = list(package.submodule_search_locations or ())
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(full, path, None) if find else None
            if spec is not None:
                origin = spec.origin
                break
    if not origin or not os.path.isfile(origin):
        raise ToolchainError(f"{full} is missing beside {package.origin}: reinstall simpler")
    return origin
