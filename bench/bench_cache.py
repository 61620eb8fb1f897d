"""Artefact-cache benchmark: a fresh clone of a set of build directories with a warm cache.

    python bench/bench_cache.py [--dirs 6] [--kernels 32] [--out docs/benchmarks-cache.md]

Measures, with whole `pypto-build ci -q -j 2` processes: the cold build of the set
(empty cache), then a fresh copy of the unbuilt sources at a new path (new mtimes,
no state) built with the warm local cache, and the same with an empty local cache
behind a real nginx (WebDAV PUT) remote cache on loopback when nginx is installed.
Also draws docs/benchmarks.png (no-op and one-edit time against kernels, pypto-build
and ninja) from bench/out/bench_build/results.json of `bench/bench_build.py`.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pypto_build.testing import synth  # noqa: E402
from pypto_build.testing.loopback import nginx_cache, nginx_path  # noqa: E402


def run(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return elapsed, out


def ci_build(dirs: list[Path], *extra: str, report: Path) -> tuple[float, dict]:
    elapsed, _ = run(["pypto-build", "ci", "-q", "-j", "2", "--json", str(report), *extra, *map(str, dirs)])
    data = json.loads(report.read_text())
    units = [u for d in data["directories"] for u in d["units"] if u["task"].startswith(("compile:", "orch:"))]
    return elapsed, {"units": len(units), "compiled": sum(u["status"] == "ran" for u in units),
                     "hits": sum(u["status"] == "from-cache" for u in units)}


def fresh_copy(src: list[Path], dest: Path) -> list[Path]:
    dest.mkdir(parents=True)
    out = []
    for d in src:
        subprocess.run(["cp", "-r", str(d), str(dest / d.name)], check=True)   # new path, new mtimes
        out.append(dest / d.name)
    return out


def plot(out: Path) -> bool:
    results = ROOT / "bench/out/bench_build/results.json"
    if not results.exists():
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = json.loads(results.read_text())["sizes"]
    ks = [s["kernels"] for s in sizes]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, label, style in (("pypto_noop", "pypto-build no-op", "o-"), ("ninja_noop", "ninja no-op", "o--"),
                              ("pypto_edit", "pypto-build one-edit", "s-"), ("ninja_edit", "ninja one-edit", "s--")):
        ax.plot(ks, [s[key]["median"] * 1000 for s in sizes], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("kernels in the build directory")
    ax.set_ylabel("wall time, ms (median, whole process)")
    ax.set_title("No-op and one-edit rebuild time (2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=6)
    ap.add_argument("--kernels", type=int, default=128)
    ap.add_argument("--out", type=Path, default=ROOT / "docs/benchmarks-cache.md")
    ap.add_argument("--work", type=Path, default=ROOT / "bench/out/bench_cache")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    src = [synth.write_l2(args.work / "src" / f"prog{i}", kernels=args.kernels, orch_name=f"prog{i}")
           for i in range(args.dirs)]
    cold_dirs = fresh_copy(src, args.work / "cold")
    cache = args.work / "cache"
    cold_s, cold = ci_build(cold_dirs, "--cache-dir", str(cache), report=args.work / "cold.json")
    warm_s, warm = ci_build(fresh_copy(src, args.work / "clone"), "--cache-dir", str(cache),
                            report=args.work / "warm.json")
    rows = [("cold build, empty cache", cold_s, cold), ("fresh clone, warm local cache", warm_s, warm)]
    if nginx_path() is not None:
        with nginx_cache(args.work / "nginx") as (url, _store):
            ci_build(fresh_copy(src, args.work / "seed"), "--remote-cache", url, "--cache-dir",
                     str(args.work / "seed-cache"), report=args.work / "seed.json")
            r_s, remote = ci_build(fresh_copy(src, args.work / "remote"), "--remote-cache", url, "--cache-dir",
                                   str(args.work / "empty-local"), report=args.work / "remote.json")
            rows.append(("fresh clone, empty local cache, remote on loopback (nginx)", r_s, remote))
    png = args.out.parent / "benchmarks.png"
    plotted = plot(png)
    lines = ["# Benchmark: the artefact cache", "",
             f"Generated by `python bench/bench_cache.py --dirs {args.dirs} --kernels {args.kernels}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} cores, "
             f"{platform.processor() or platform.machine()}, Python {platform.python_version()}.", "",
             f"A set of {args.dirs} build directories of {args.kernels} kernels each (distinct programs: nothing is "
             "shared between directories), built with `pypto-build ci -q -j 2` (two directories at a time). "
             "\"Fresh clone\" is a `cp -r` of the unbuilt sources to a new path: new mtimes, no state.", "",
             "| run | wall time | units | compiled | from cache | hit rate | time per hit |",
             "|---|---|---|---|---|---|---|"]
    for name, secs, r in rows:
        rate = r["hits"] / r["units"] if r["units"] else 0.0
        per_hit = f"{secs / r['hits'] * 1000:.1f} ms" if r["hits"] else "—"
        lines.append(f"| {name} | {secs:.2f} s | {r['units']} | {r['compiled']} | {r['hits']} | {rate:.0%} | {per_hit} |")
    lines += ["", f"Warm local cache / cold build: **{warm_s / cold_s:.3f}** (goal: at most 1/20 = 0.050; "
              f"{'met' if warm_s / cold_s <= 0.05 else 'not met'}). \"Time per hit\" is the whole run divided by the "
              "hits, so it includes start-up and planning."]
    if len(rows) == 2:
        lines += ["", "No remote row: nginx is not installed (`apt-get install nginx-light`)."]
    if plotted:
        lines += ["", "## No-op and one-edit time against the number of kernels", "",
                  "From `bench/out/bench_build/results.json` of the last `python bench/bench_build.py` run "
                  "(see benchmarks.md):", "", "![no-op and one-edit time](benchmarks.png)"]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
