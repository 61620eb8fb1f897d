#!/usr/bin/env python3
"""Interleaved A/B of two revisions: the no-op and the one-edit rebuild, run alternately.

    python bench/bench_ab.py --base 4080fd9 [--head HEAD] [--sizes 16,256] [--noops 16] [--edits 14]
    python bench/bench_ab.py --base main --head . --sizes 64 --jobs 1 --kernel -1 --edits 15 --hand  # issue 14
    python bench/bench_ab.py --base main --head 7838353,043c3f5,HEAD --sizes 64 --jobs 1   # steps, all interleaved
    python bench/bench_ab.py --base 3418a20 --sizes 64 --jobs 1 --kernel -1 --verb validate --noops 0  # issue 36

`bench_build.py` measures one revision per run; on a shared machine its load
drifts between two such runs by more than a refactoring changes. Here both
revisions (`git archive` snapshots; a directory, e.g. `.`, is used as it is, with
its uncommitted changes; `--head` may list several, compared in the same rotation)
build their own copy of the same synthetic directory
(`testing.synth.write_l2`, from the head's snapshot), then run alternately — ABBA
order — `python -m pypto_build build -q [-j N] DIR`: steady no-ops (after one
untimed first no-op), then one-edit rebuilds (a comment appended to kernel
`--kernel` of each copy). `--verb validate` times `validate -q` instead, on copies with a golden.py, each edit a new
definition (a new binary: the program runs and validates, and its variant is recorded). Prints median / min / max
wall time per revision and
the median CPU time (user + sys of the process and its children, from
`getrusage(RUSAGE_CHILDREN)`: less noisy than wall on a shared machine). `--hand`
also times that kernel's compile by hand: the unit's exact argv, run with
subprocess from its sub-build directory in a copy of its own.
Times are of whole processes, with `.pyc` (PYTHONPYCACHEPREFIX).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def snapshot(rev: str, dest: Path) -> Path:
    if Path(rev).is_dir():
        return Path(rev).resolve()
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd: list[str], **kwargs) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the process and its children, the process) of one run."""
    cpu, start = children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - start, children_cpu() - cpu, proc


def build(root: Path, directory: Path, work: Path, jobs: int = 2, verb: str = "build") -> tuple[float, float]:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=str(work / f"pyc-{root.name}"),
               XDG_CACHE_HOME=str(work / f"cache-{root.name}"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # cwd: `python -m` puts the working directory first on sys.path, so run from a checkout both sides
    # would import that checkout's pypto_build instead of their own (PYTHONPATH)
    wall, cpu, proc = timed([sys.executable, "-m", "pypto_build", verb, "-q",
                             *(["-j", str(jobs)] if jobs > 1 else []), str(directory)], env=env, cwd=work)
    if proc.returncode:
        raise SystemExit(f"bench_ab: {verb} of {directory} with {root.name} failed:\n{proc.stderr}")
    return wall, cpu


def edit_unit(directory: Path, func_id: int):
    from pypto_build.plan.graph import load_graph
    from pypto_build.testing.synth import kernel_path
    rel = kernel_path(directory, func_id).relative_to(directory).as_posix()
    return next(u for p in load_graph(directory).plans for u in p.units if u.source == rel)


def measure(revs: dict[str, Path], kernels: int, noops: int, edits: int, work: Path, jobs: int, kernel: int,
            hand: bool, verb: str = "build") -> dict[str, dict]:
    sys.path.insert(0, str(list(revs.values())[-1]))
    from pypto_build.testing.synth import kernel_path, write_l2

    kernel = min(kernel, kernels - 1) if kernel >= 0 else kernels // 2
    golden = verb == "validate"
    dirs = {name: write_l2(work / f"{name}-{kernels}", kernels=kernels, golden=golden) for name in revs}
    times: dict[str, dict] = {name: {"no-op": [], "one-edit": []} for name in revs}
    if hand:
        copy = write_l2(work / f"hand-{kernels}", kernels=kernels)
        unit = edit_unit(copy, kernel)
        cwd = copy / unit.sub_rel
        (cwd / unit.output).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(unit.argv, cwd=cwd, capture_output=True, check=True)        # warm-up, untimed
        times["by hand"] = {"compile": [timed(list(unit.argv), cwd=cwd)[:2] for _ in range(max(edits, 5))]}
    for name, root in revs.items():
        build(root, dirs[name], work, verb=verb)
    time.sleep(2.5)                                  # past the racy window: the first no-op refreshes states
    for name, root in revs.items():
        build(root, dirs[name], work, jobs, verb)    # first no-op (untimed)
    order = list(revs)
    for kind, count in (("no-op", noops), ("one-edit", edits)):
        for i in range(count):
            for name in (order if i % 2 == 0 else order[::-1]):
                if kind == "one-edit":
                    with open(kernel_path(dirs[name], kernel), "a", encoding="utf-8") as handle:
                        handle.write(f'extern "C" int bench_edit_{i} = {i};\n' if golden else f"// edit {i}\n")
                times[name][kind].append(build(revs[name], dirs[name], work, jobs, verb))
    return times


def row(runs: list[tuple[float, float]]) -> str:
    wall = [w * 1e3 for w, _ in runs]
    cpu = [c * 1e3 for _, c in runs]
    return (f"{statistics.median(wall):.0f} ms ({min(wall):.0f}-{max(wall):.0f}, n={len(wall)}), "
            f"CPU {statistics.median(cpu):.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the revision before (e.g. a commit), or a checkout directory")
    ap.add_argument("--head", default="HEAD", help="the revision after (default HEAD), or a checkout directory; "
                                                  "several, comma-separated, are all measured in turn")
    ap.add_argument("--sizes", default="16,256", help="kernel counts, comma-separated")
    ap.add_argument("--noops", type=int, default=16, help="steady no-ops per revision")
    ap.add_argument("--edits", type=int, default=14, help="one-edit rebuilds per revision")
    ap.add_argument("--jobs", type=int, default=2, help="-j of the timed runs (default 2; 1: no -j)")
    ap.add_argument("--kernel", type=int, default=0, help="func_id of the edited kernel (-1: the middle one)")
    ap.add_argument("--hand", action="store_true", help="also time compiling the edited kernel by hand")
    ap.add_argument("--verb", choices=("build", "validate"), default="build",
                    help="what is timed: build -q (default), or validate -q on copies with a golden.py")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    try:
        heads = args.head.split(",")
        revs = {"base": snapshot(args.base, work / "base")}
        for i, rev in enumerate(heads):
            revs["head" if len(heads) == 1 else rev] = snapshot(rev, work / f"head{i}")
        print(f"base {args.base}, head {args.head}; {os.cpu_count()} cores; -j {args.jobs}; "
              "wall medians (min-max) of whole processes, CPU = user+sys medians")
        for size in (int(s) for s in args.sizes.split(",")):
            times = measure(revs, size, args.noops, args.edits, work, args.jobs, args.kernel, args.hand, args.verb)
            for name, kinds in times.items():
                for kind, runs in kinds.items():
                    if not runs:
                        continue
                    print(f"{size} kernels, {kind}, {name}: {row(runs)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
