"""The project's own development tasks: `doit test`, `doit fast`, `doit lint`, `doit bench`, `doit example`."""

DOIT_CONFIG = {"default_tasks": ["test"], "verbosity": 2}


def task_test():
    """Run the test suite."""
    return {"actions": ["python -m pytest -q"], "uptodate": [False]}


def task_fast():
    """Run the fast subset of the tests (not marked slow; about 70 s on 2 cores)."""
    return {"actions": ["python -m pytest -q -m 'not slow'"], "uptodate": [False]}


def task_lint():
    """Byte-compile everything and run pyflakes (the examples are generated-style data, left out)."""
    return {"actions": ["python -m compileall -q pypto_build tests bench",
                        "git ls-files '*.py' | grep -v '^pypto_build/examples/' | xargs python -m pyflakes"],
            "uptodate": [False]}


def task_bench():
    """Run the benchmarks: docs/benchmarks.md (~15 min on 2 cores), the cache one and the plot (~1 min), scale (~3 min)."""
    return {"actions": ["python bench/bench_build.py --rev HEAD --out docs/benchmarks.md",
                        "python bench/bench_cache.py --out docs/benchmarks-cache.md",
                        "python bench/bench_scale.py"], "uptodate": [False]}


def task_example():
    """Copy the embedded example build directory to ./pypto_build_example and build it."""
    return {"actions": ["pypto-build example"], "uptodate": [False]}
