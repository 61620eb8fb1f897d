"""The package's shape (issue 12): no import circle, no upward import, each family entered by its door.

Imports inside functions count: a circle hidden by one still ties the modules
together, so neither can be understood, tested or moved without the other.
The layers are the ones docs/architecture.md draws.
"""
from __future__ import annotations

import ast
import graphlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pypto_build

PACKAGE = Path(pypto_build.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The package's modules that `path` imports anywhere in its text (top level or inside functions)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found |= {c for c in (target, *(f"{target}.{a.name}" for a in node.names)) if c in known}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
    return found - {name}


def import_graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "examples" not in p.relative_to(PACKAGE).parts]
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) for p in paths}


def test_the_walk_sees_imports_inside_functions():
    graph = import_graph()
    assert "pypto_build.run.execution" in graph["pypto_build.run.child"]        # `from .execution import` in a function
    assert "pypto_build.platforms.host.runtime.executor" in graph["pypto_build.platforms.host.runtime.l3"]


# Bottom to top. A part is a top-level module or a folder; a part imports only parts of its own layer or below
# (within a layer, no circle: test_no_import_circle). docs/architecture.md draws the same layers.
LAYERS = (
    ("core", {"__init__", "errors", "core"}),
    ("reading a build directory", {"builddir"}),
    ("toolchain", {"toolchain"}),
    ("families", {"platforms", "pto", "cache", "testing"}),
    ("the compile stage", {"compile"}),
    ("planning", {"plan"}),
    ("the variants a directory ran", {"variants"}),
    ("the run stage", {"run"}),
    ("the stages of a build", {"build_stages"}),
    ("what the user asks", {"options"}),
    ("engine", {"engine"}),
    ("the pipeline", {"pipeline"}),
    ("what the front ends call", {"api", "verbs"}),
    ("front ends", {"ci", "watch", "compat", "culprits"}),
    ("the command line", {"cli", "replay_main", "__main__"}),
)
# Folders entered through a door (their __init__'s _EXPORTS / _MODULES); the other folders (core, builddir,
# toolchain, compile, plan, cli, ci) are plain: their modules are imported by name.
FAMILIES = {"platforms", "pto", "cache", "testing", "run", "engine", "compat", "watch", "culprits"}


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def test_every_part_has_a_layer():
    parts = {part(m) for m in import_graph()}
    placed = set().union(*(members for _name, members in LAYERS))
    assert parts - placed == set(), "give these a layer in LAYERS and docs/architecture.md"
    assert placed - parts == set(), "gone from the package: drop them from LAYERS"


def test_no_upward_import():
    layer = {p: i for i, (_name, members) in enumerate(LAYERS) for p in members}
    upward = sorted(f"{m} imports {d} ({LAYERS[layer[part(d)]][0]} above {LAYERS[layer[part(m)]][0]})"
                    for m, deps in import_graph().items() for d in deps if layer[part(d)] > layer[part(m)])
    assert upward == []


def test_what_all_platforms_share_imports_no_platform_implementation():
    """Issue 34 item 7: the one L3 driver, its shims, the platform records and the diagnostics listing serve every
    platform, so none of them imports an implementation folder (`platforms/host/`, `platforms/simpler/`) — the
    records name theirs as text, loaded when asked."""
    graph = import_graph()
    shared = [m for m in graph if m.startswith("pypto_build.platforms.") and m.count(".") == 2]
    assert "pypto_build.platforms.l3_driver" in shared and "pypto_build.platforms.dfx_outputs" in shared
    implementations = ("pypto_build.platforms.host", "pypto_build.platforms.simpler")
    found = sorted(f"{m} imports {d}" for m in shared for d in graph[m] if d.startswith(implementations))
    assert found == []


def door_of(family: str) -> tuple[dict, tuple]:
    """The `_EXPORTS` map and `_MODULES` tuple a family's `__init__` declares."""
    tree = ast.parse((PACKAGE / family / "__init__.py").read_text(encoding="utf-8"))
    found = {"_EXPORTS": {}, "_MODULES": ()}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id in found:
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["_EXPORTS"], found["_MODULES"]


def test_families_are_entered_through_their_door():
    """Outside a family, code imports the family itself (`from .pto import plan_pto`), never one of its
    modules; what it takes must be on the door's list."""
    graph = import_graph()
    through_side = sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps
                          if part(d) in FAMILIES and part(m) != part(d) and d.count(".") > 1
                          and d.rpartition(".")[2] not in door_of(part(d))[1])
    assert through_side == []
    for path in PACKAGE.rglob("*.py"):
        mod = module_name(path)
        if "examples" in mod:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            if target.count(".") == 1 and part(target) in FAMILIES and part(mod) != part(target):
                exports, modules = door_of(part(target))
                missing = [a.name for a in node.names if a.name not in exports and a.name not in modules]
                assert missing == [], f"{mod}: {missing} not on the door of {target}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_door_names_real_things_and_never_a_module_by_an_export(family):
    """An export named like one of the family's modules would be shadowed by that module once it is
    imported (Python sets the submodule as the package's attribute)."""
    import importlib
    exports, modules = door_of(family)
    names = {p.stem for p in (PACKAGE / family).glob("*.py")}
    assert set(exports) & names == set()
    package = importlib.import_module(f"pypto_build.{family}")
    for name in [*exports, *modules]:
        assert getattr(package, name) is not None


def test_the_engine_keeps_none_of_the_pipelines_records():
    """Issue 34 item 5: the no-op record, the compiler's answers and the digests of outside files are the
    pipeline's bookkeeping (`pipeline.Bookkeeping`, handed to the engine): no engine module imports their modules.
    Nor the header sets' (their pruning: test_pipeline.py; the take-over of the state of before moves them with
    the database, in `Bookkeeping.before`; the compile stage's own check reads a unit's set)."""
    records = {"pypto_build.plan.noop", "pypto_build.plan.noop_record", "pypto_build.toolchain.search_dirs",
               "pypto_build.core.hashing", "pypto_build.compile.header_sets"}
    found = sorted(f"{m} imports {d}" for m, deps in import_graph().items() if m.startswith("pypto_build.engine")
                   for d in deps & records)
    assert found == []


def test_planning_imports_no_doit(tmp_path):
    """`graph.load_graph` plans without doit: planning can be used (and tested) on its own."""
    from pypto_build.testing import synth
    root = synth.write_l2(tmp_path / "d", kernels=2)
    code = ("import sys; from pypto_build.plan.graph import load_graph; g = load_graph(sys.argv[1]); "
            "assert g.compile_tasks, g; print(sorted(m for m in sys.modules if m.split('.')[0] == 'doit'))")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_build_imports_only_what_it_uses(tmp_path):
    """A one-edit build (issue 14) runs doit's own `run` command (issue 23) without looking up doit plugins (each
    look-up reads every installed package's entry points), and imports no remote-cache, ELF, runtime, simpler
    or CANN code, and none of the standard modules only those need."""
    from pypto_build.testing import synth
    root = synth.write_l2(tmp_path / "d", kernels=2)
    code = ("import sys, importlib.metadata as m; looked = []; real = m.entry_points\n"
            "m.entry_points = lambda *a, **k: looked.append(k) or real(*a, **k)\n"
            "from pypto_build.cli.main import main; assert main(['build', '-q', sys.argv[1]]) == 0\n"
            "print(' '.join(sorted(sys.modules)), 'entry-points:%d' % len(looked))")
    for _ in range(2):          # the first build, then a one-edit one (the compiler's answers kept)
        out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        synth.kernel_path(root, 0).write_text(synth.kernel_path(root, 0).read_text() + "// edited\n")
    loaded = set(out.stdout.split())
    assert {"doit.cmd_run", "doit.runner", "doit.task", "pypto_build.engine.commands", "entry-points:0"} <= loaded
    unwanted = {"http.client", "ssl", "elftools", "pypto_build.cache.remote",
                "pypto_build.platforms.host.runtime.executor", "pypto_build.platforms.simpler.sim",
                "pypto_build.platforms.simpler.device", "pypto_build.compat", "pypto_build.pto.actions"}
    assert sorted(loaded & unwanted) == []


def test_debug_run_py_written_before_the_split_still_finds_main():
    from pypto_build.compat.runner_main import main
    from pypto_build.replay_main import main as old
    assert old is main


def test_no_import_circle():
    graph = import_graph()
    # a package's __init__ only names its modules for lazy access (PEP 562); importing the package is not
    # a use of what it re-exports, so edges into a package are left out
    packages = {name for name in graph if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()}
    sorter = graphlib.TopologicalSorter({m: deps - packages for m, deps in graph.items()})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_a_library_build_leaves_standard_modules_real(tmp_path):
    """A library caller's code keeps the real standard modules after a build (no placeholder stands in for
    any), e.g. multiprocessing.Process is a class it can subclass."""
    from pypto_build.testing import synth
    root = synth.write_l2(tmp_path / "d", kernels=2)
    code = ("import sys, pypto_build; pypto_build.build(sys.argv[1]); import multiprocessing, hashlib\n"
            "class P(multiprocessing.Process): pass\n"
            "print(isinstance(multiprocessing.Process, type), hashlib.sha256(b'').hexdigest()[:8], "
            "any(getattr(m, '__deferred__', False) for m in list(sys.modules.values())))")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "e3b0c442", "False"]


@pytest.mark.slow
def test_a_validate_that_reuses_its_verdict_imports_no_torch(built_golden, tmp_path):
    """The verdict's check asks the golden key (issue 25 item 6) without torch. (importlib.metadata is
    imported by doit's package itself, with its plugin loading: no longer a cost the key can save.)"""
    import shutil

    root = tmp_path / "g"
    subprocess.run(["cp", "-a", str(built_golden), str(root)], check=True)
    command = [sys.executable, "-X", "importtime", shutil.which("pypto-build"), "validate", "-q", str(root)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    loaded = {line.split("|")[-1].strip() for line in again.stderr.splitlines() if line.startswith("import time:")}
    assert "doit.runner" in loaded and "pypto_build.run.golden_key" in loaded     # the verdict was checked
    assert sorted(m for m in loaded if m.split(".")[0] == "torch") == []


# Run in a fresh interpreter: what importing the whole package (every module, and every name its doors
# offer) changes in the process. The heavy third-party modules are imported first, so what they do when
# imported is theirs; doit is not (a package registered without its __init__ would otherwise go unseen).
# A call is ours when the module being imported at that moment (the innermost module-level frame) is ours.
SIDE_EFFECTS_PROBE = r'''
import atexit, ctypes, importlib, inspect, json, os, signal, sys, threading, types, warnings
from pathlib import Path
for name in ("torch", "numpy", "xxhash", "elftools", "watchfiles"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
package = Path(sys.argv[1])

def importing() -> str:
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return frame.f_globals.get("__name__", "?") if frame is not None else "?"

calls = []
def recorded(owner, attr):
    real = getattr(owner, attr)
    def call(*args, **kwargs):
        module = importing()
        if module.split(".")[0] == "pypto_build":
            calls.append(f"{module}: {getattr(owner, '__name__', type(owner).__name__)}.{attr}")
        return real(*args, **kwargs)
    setattr(owner, attr, call)

for owner, attr in ((os, "register_at_fork"), (atexit, "register"), (signal, "signal"), (signal, "set_wakeup_fd"),
                    (signal, "pthread_sigmask"), (sys, "addaudithook"), (threading.Thread, "start"), (os, "chdir"),
                    (os, "setsid"), (os, "umask"), (os, "putenv"), (os, "unsetenv"), (sys, "setrecursionlimit")):
    recorded(owner, attr)

def pdeathsig() -> int:
    value = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(value))      # PR_GET_PDEATHSIG
    return value.value

def state():
    return {"environ": dict(os.environ), "cwd": os.getcwd(), "path": list(sys.path), "meta_path": list(sys.meta_path),
            "path_hooks": list(sys.path_hooks), "hooks": [sys.excepthook, sys.unraisablehook, sys.displayhook],
            "signals": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP)},
            "warnings": list(warnings.filters), "threads": threading.active_count(), "pdeathsig": pdeathsig()}

before, known = state(), dict(sys.modules)
families = sorted(p.parent.name for p in package.glob("*/__init__.py") if p.parent.name != "examples")
for family in ("engine", *families):                            # every name a door offers
    door = importlib.import_module(f"pypto_build.{family}")
    for name in getattr(door, "__all__", ()):
        getattr(door, name)
for path in sorted(package.rglob("*.py")):                      # every module
    parts = path.relative_to(package.parent).with_suffix("").parts
    if "examples" in parts or parts[-1] == "__main__":
        continue
    importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
after = state()
changed = sorted(key for key in before if before[key] != after[key])
from doit.dependency import CHECKERS
if any(not checker.__module__.startswith("doit.") for checker in CHECKERS.values()):
    changed.append("doit.dependency.CHECKERS")      # doit's table holds doit's checkers only
odd = [f"{key}: replaced" for key, module in known.items() if sys.modules.get(key) is not module]
for key in sorted(set(sys.modules) - set(known)):
    module = sys.modules[key]
    spec = getattr(module, "__spec__", None)
    if not isinstance(module, types.ModuleType) or (module.__name__ != key and getattr(spec, "name", "") != key):
        odd.append(f"{key}: not the module its name imports")
    elif key.split(".")[0] != "pypto_build" and "__getattr__" in vars(module) and \
            getattr(vars(module)["__getattr__"], "__module__", key) != key:
        odd.append(f"{key}: a __getattr__ from {vars(module)['__getattr__'].__module__}")
print(json.dumps({"calls": calls, "changed": changed, "modules": odd}))
'''


def test_importing_the_package_has_no_side_effects():
    """Importing every module and using every door (issue 23 item 6) registers no fork, exit or audit hook,
    starts no thread, sets no signal handler, environment variable, working directory or parent-death signal
    (not even with the warm server's old variable set), leaves `sys.modules` holding only real modules (no
    placeholder, no package without its __init__), and leaves doit's CHECKERS table alone."""
    env = dict(os.environ, PYPTO_BUILD_WARM_PARENT=str(os.getpid()))
    out = subprocess.run([sys.executable, "-c", SIDE_EFFECTS_PROBE, str(PACKAGE)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.splitlines()[-1])
    assert found == {"calls": [], "changed": [], "modules": []}
