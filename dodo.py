"""The project's own development tasks: `doit test`, `doit fast`, `doit lint`, `doit bench`, `doit example`.

Nothing here writes into the source tree: the suite and the examples' tests compare the package's
example directories file by file, so `lint` checks syntax without leaving `__pycache__` behind.
"""
import shlex
import sys
from pathlib import Path

DOIT_CONFIG = {"default_tasks": ["test"], "verbosity": 2}

PYTHON = shlex.quote(sys.executable)     # the interpreter doit runs in (the venv's), whatever PATH says
TEST = f"{PYTHON} -m pytest -q -n 2"     # the README's test command (two test processes)


def task_test():
    """Run the test suite as the README does."""
    return {"actions": [TEST], "uptodate": [False]}


def task_fast():
    """Run the fast subset of the tests (not marked slow; about 70 s on 2 cores)."""
    return {"actions": [f"{PYTHON} -m pytest -q -m 'not slow'"], "uptodate": [False]}


def _compiles() -> None:
    """Compile every Python file in memory (a syntax check that writes no bytecode)."""
    for path in sorted(p for top in ("pypto_build", "tests", "bench", "tools") for p in Path(top).rglob("*.py")):
        compile(path.read_bytes(), str(path), "exec")


def task_lint():
    """Check every file compiles (nothing written) and run pyflakes (the examples are generated-style data, left out)."""
    return {"actions": [_compiles,
                        f"git ls-files '*.py' | grep -v '^pypto_build/examples/' | xargs {PYTHON} -m pyflakes"],
            "uptodate": [False]}


def task_bench():
    """Run the benchmarks: docs/benchmarks.md (~15 min on 2 cores), the cache one and the plot (~1 min), scale (~3 min)."""
    return {"actions": [f"{PYTHON} bench/bench_build.py --rev HEAD --out docs/benchmarks.md",
                        f"{PYTHON} bench/bench_cache.py --out docs/benchmarks-cache.md",
                        f"{PYTHON} bench/bench_scale.py"], "uptodate": [False]}


def task_example():
    """Copy the embedded example build directory to ./pypto_build_example and build it."""
    return {"actions": ["pypto-build example"], "uptodate": [False]}
