#!/usr/bin/env python3
"""Interleaved A/B of two revisions: the no-op and the one-edit rebuild, run alternately.

    python bench/bench_ab.py --base 4080fd9 [--head HEAD] [--sizes 16,256] [--noops 16] [--edits 14]

`bench_build.py` measures one revision per run; on a shared machine its load
drifts between two such runs by more than a refactoring changes. Here both
revisions (`git archive` snapshots) build their own copy of the same synthetic
directory (`testing.synth.write_l2`, from the head's snapshot), then run
alternately — ABBA order — `python -m pypto_build build -q -j 2 DIR`: steady
no-ops (after one untimed first no-op), then one-edit rebuilds (a comment
appended to kernel 0 of each copy). Prints median / min / max per revision.
Times are wall clock of whole processes, with `.pyc` (PYTHONPYCACHEPREFIX).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def snapshot(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def build(root: Path, directory: Path, work: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=str(work / f"pyc-{root.name}"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pypto_build", "build", "-q", "-j", "2", str(directory)],
                          env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"bench_ab: build of {directory} with {root.name} failed:\n{proc.stderr}")
    return time.perf_counter() - start


def measure(revs: dict[str, Path], kernels: int, noops: int, edits: int, work: Path) -> dict[str, dict]:
    sys.path.insert(0, str(revs["head"]))
    from pypto_build.testing.synth import kernel_path, write_l2

    dirs = {name: write_l2(work / f"{name}-{kernels}", kernels=kernels) for name in revs}
    for name, root in revs.items():
        build(root, dirs[name], work)
    time.sleep(2.5)                                  # past the racy window: the first no-op refreshes states
    for name, root in revs.items():
        build(root, dirs[name], work)                # first no-op (untimed)
    times: dict[str, dict] = {name: {"no-op": [], "one-edit": []} for name in revs}
    order = list(revs)
    for kind, count in (("no-op", noops), ("one-edit", edits)):
        for i in range(count):
            for name in (order if i % 2 == 0 else order[::-1]):
                if kind == "one-edit":
                    with open(kernel_path(dirs[name], 0), "a", encoding="utf-8") as handle:
                        handle.write(f"// edit {i}\n")
                times[name][kind].append(build(revs[name], dirs[name], work))
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the revision before (e.g. a commit)")
    ap.add_argument("--head", default="HEAD", help="the revision after (default HEAD)")
    ap.add_argument("--sizes", default="16,256", help="kernel counts, comma-separated")
    ap.add_argument("--noops", type=int, default=16, help="steady no-ops per revision")
    ap.add_argument("--edits", type=int, default=14, help="one-edit rebuilds per revision")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    try:
        revs = {"base": snapshot(args.base, work / "base"), "head": snapshot(args.head, work / "head")}
        print(f"base {args.base}, head {args.head}; {os.cpu_count()} cores; medians (min-max) of whole processes")
        for size in (int(s) for s in args.sizes.split(",")):
            times = measure(revs, size, args.noops, args.edits, work)
            for kind in ("no-op", "one-edit"):
                row = ", ".join(f"{name} {statistics.median(t[kind]) * 1e3:.0f} ms ({min(t[kind]) * 1e3:.0f}-"
                                f"{max(t[kind]) * 1e3:.0f}, n={len(t[kind])})" for name, t in times.items())
                print(f"{size} kernels, {kind}: {row}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
