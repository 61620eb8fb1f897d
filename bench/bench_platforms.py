#!/usr/bin/env python3
"""The shipped example on simpler's a2a3sim: pypto_build against compiling as PyPTO's replay does.

    PATH=<simpler venv>/bin:$PATH <simpler venv>/bin/python bench/bench_platforms.py [--rounds 5]

Needs simpler importable (and its `g++-15` on PATH). Per round, on a fresh copy of
`pypto_build/examples/matmul_relu`: a cold `build -j 2`, a no-op `build`, a one-edit
`build` (one kernel's loop changed), each a whole `python -m pypto_build` process; and
PyPTO's default replay's compile step — every unit compiled by simpler's own
`KernelCompiler` (the orchestration and two kernels, one after another, in this
process: PyPTO runs them on threads, so on 2 cores its wall time is between this
and half of it). Prints median / min / max in seconds.
"""
from __future__ import annotations

import argparse
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "pypto_build" / "examples" / "matmul_relu"
KERNELS = (("aic", "kernels/aic/matmul_relu_incore_0_aic.cpp"), ("aiv", "kernels/aiv/matmul_relu_incore_1_aiv.cpp"))


def timed(*args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - start


def pypto_compile(root: Path) -> float:
    """What PyPTO's replay(recompile=True) compiles: every unit, with simpler's KernelCompiler."""
    from simpler_setup import KernelCompiler
    from pypto_build.platforms.simpler.env import find_simpler

    install = find_simpler()
    base = install.project_root / "src" / "a2a3" / "runtime" / "tensormap_and_ringbuffer"
    config = runpy.run_path(str(base / "build_config.py"))["BUILD_CONFIG"]
    dirs = [*(str(base / d) for d in config["aicore"]["include_dirs"]),
            str(install.project_root / "src" / "common"), str(install.project_root / "src" / "common" / "task_interface")]
    start = time.perf_counter()
    compiler = KernelCompiler(platform="a2a3sim")
    compiler.compile_orchestration("tensormap_and_ringbuffer", str(root / "orchestration" / "matmul_relu.cpp"))
    for core, source in KERNELS:
        compiler.compile_incore(str(root / source), core_type=core, pto_isa_root=str(install.pto_isa_root),
                                extra_include_dirs=dirs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    figures: dict[str, list[float]] = {"cold build -j 2": [], "first no-op build": [], "no-op build": [],
                                       "one-edit build": [], "PyPTO-style compile of every unit": []}
    with tempfile.TemporaryDirectory(prefix="bench-platforms-") as tmp:
        for i in range(rounds):
            root = Path(shutil.copytree(EXAMPLE, Path(tmp) / f"ex{i}"))
            figures["cold build -j 2"].append(timed("build", "-q", "-j", "2", str(root)))
            # the first no-op after a cold build of files just copied decides by content (they are too new
            # for the no-op record: its racy window) and records; the next is answered from the record
            figures["first no-op build"].append(timed("build", "-q", str(root)))
            figures["no-op build"].append(timed("build", "-q", str(root)))
            kernel = root / KERNELS[1][1]
            kernel.write_text(kernel.read_text().replace("for (int64_t i = 0; i < M; ++i)",
                                                         "for (int64_t i = M; i-- > 0;)", 1))
            figures["one-edit build"].append(timed("build", "-q", str(root)))
            figures["PyPTO-style compile of every unit"].append(pypto_compile(root))
    print(f"a2a3sim, shipped example (1 orchestration + 2 kernels), {rounds} rounds, {os.cpu_count()} cores")
    for name, values in figures.items():
        print(f"  {name:36s} median {statistics.median(values):6.2f} s  min {min(values):6.2f}  max {max(values):6.2f}")


if __name__ == "__main__":
    main()
