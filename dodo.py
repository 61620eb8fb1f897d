"""The project's own development tasks: `doit test`, `doit lint`, `doit bench`, `doit example`."""

DOIT_CONFIG = {"default_tasks": ["test"], "verbosity": 2}


def task_test():
    """Run the test suite."""
    return {"actions": ["python -m pytest -q"], "uptodate": [False]}


def task_lint():
    """Byte-compile everything and look for code written twice."""
    return {"actions": ["python -m compileall -q pypto_build tests bench",
                        "python -m pyflakes pypto_build tests bench"],
            "uptodate": [False]}


def task_bench():
    """Run the benchmark and rewrite docs/benchmarks.md (takes ~15 min on 2 cores)."""
    return {"actions": ["python bench/bench_build.py --out docs/benchmarks.md"], "uptodate": [False]}


def task_example():
    """Copy the embedded example build directory to ./pypto_build_example and build it."""
    return {"actions": ["pypto-build example"], "uptodate": [False]}
