"""Whether simpler (PyPTO's runtime) is importable by this Python, and where it is installed. Light
(os, sys): the platform choice asks, and so does the console script's no-op answer, which
`importlib.util` alone would slow by a tenth (it loads contextlib and more): the import system's
finders (`sys.meta_path`) are asked directly."""
from __future__ import annotations

import os
import sys

from ..errors import ToolchainError, say_fix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

SIMPLER_MODULES = ("simpler", "simpler_setup", "_task_interface")   # what a simpler install provides
PTO_ISA_TREE = os.path.join("build", "pto-isa")      # simpler's managed PTO-ISA tree, under the project root
GET_SIMPLER = 'docs/platforms.md, "Building simpler locally": tools/build-simpler.sh'   # simpler is on no registry


def simpler_missing() -> str | None:
    """Why simpler cannot serve here (a module it provides is not importable), or None. Imports nothing."""
    for name in SIMPLER_MODULES:
        try:
            found = _spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"PyPTO's runtime simpler is not installed for {sys.executable} (module {name} not importable)"
    return None


def choose_host(api_where: str = "") -> str:
    """The remedy "run on the host runtime instead", as the front end that runs says it (`errors.say_fix`);
    `api_where`: the library calls that take the parameter, in parentheses after it."""
    return say_fix("pass --platform host", 'pass platform="host"' + (f" ({api_where})" if api_where else ""))


def unserved(platform: str) -> str | None:
    """Why `platform`, one of simpler's, cannot serve here (the record's `unserved`: a recorded one then falls
    back to the host runtime): simpler not importable, with what to do in the same line; else None."""
    if simpler_missing() is None:
        return None
    return (f"simpler (PyPTO's runtime) is not importable here — install it for {platform}'s results "
            f"({GET_SIMPLER}), or " + choose_host()
            + " to choose the host runtime on purpose")


def refusal(why: str, platform: str | None = None) -> str:
    """The line refusing a platform asked for on purpose that needs simpler, which is missing (`why`): what the
    user can do — the host runtime (asked for, or what a recorded simulator falls back to), or simpler built."""
    host = choose_host("build(), validate(), RunConfig")
    unset = say_fix("give no --platform nor $PYPTO_BUILD_PLATFORM", "leave platform None and $PYPTO_BUILD_PLATFORM unset")
    return (f"{why}, and {platform or 'this platform'} runs on it: {host} to run on the host runtime, or "
            f"{unset} (a directory recording a simulator then falls back to the host runtime, as `pypto-build "
            f"example` does); or build simpler and install it into this Python ({GET_SIMPLER})")


def install_places(platform: str | None = None) -> tuple[str, str]:
    """(project_root, setup_dir) of the simpler install this Python would use, resolved, asking neither git
    nor simpler (planning and the no-op key ask it); ToolchainError when there is none (for `platform`).

    `project_root` as `simpler_setup/environment.py` decides it: its folder's `_assets/` when that holds
    `src/` (a wheel), else the folder above it (a checkout); `setup_dir` the folder of
    `simpler_setup/kernel_compiler.py` (its `incore/` is on every kernel's path).
    """
    why = simpler_missing()
    if why:
        raise ToolchainError(refusal(why, platform))
    spec = _spec("simpler_setup")
    assert spec is not None     # simpler_missing() said so
    here = os.path.dirname(os.path.realpath(_module_file("environment", spec)))
    assets = os.path.join(here, "_assets")
    root = assets if os.path.isdir(os.path.join(assets, "src")) else os.path.dirname(here)
    return root, os.path.dirname(os.path.realpath(_module_file("kernel_compiler", spec)))


def _spec(name: str, path: list[str] | None = None) -> ModuleSpec | None:
    """The spec `import name` would use (as `importlib.util.find_spec` finds it): the module's own when it is
    loaded, else the first finder's answer; None when none answers."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path, None) if find else None
        if spec is not None:
            return spec
    return None


def _module_file(name: str, package: ModuleSpec) -> str:
    """The file `import <package>.<name>` would load, asked of the import system without importing the package."""
    full = f"{package.name}.{name}"
    spec = _spec(full, list(package.submodule_search_locations or ()))
    origin = spec.origin if spec is not None else None
    if not origin or not os.path.isfile(origin):
        raise ToolchainError(f"{full} is missing beside {package.origin}: reinstall simpler")
    return origin
