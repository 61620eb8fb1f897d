"""The no-op side by side: `pypto-build build -q DIR` against `ninja -C DIR`, runs interleaved.

One synthetic directory of N kernels (bench_build's, `write_l2`) is built once by the working tree's
`pypto-build` (-j 2) and once, in a copy with bench_build's build.ninja, by ninja. The working tree runs
as this environment has it (the README's editable install: a path in a .pth file); with
`--installed` also from a wheel in a venv of its own, as a user installs it; with `--against REV` a
`git archive` snapshot of REV runs too, through a console script written as pip writes one for REV's
entry point. Each pypto-build has a copy of the built directory of its own (re-hashed once, never
rebuilt), so no run of one can make another's record stale. Each tool runs once untimed past the racy
window (so its no-op record exists), then the timed runs go round-robin, every tool once per round, so
load from other processes falls on all of them alike. Every ninja run must say "no work to do"; no tool
may rewrite an output, and no pypto-build run may rewrite its no-op record (a run through doit would).
Reports the median and minimum per tool and the ratio of medians to ninja's, in a block of
docs/benchmarks.md that bench_build keeps.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_build as bb  # noqa: E402

BEGIN, END = "<!-- bench_noop:begin -->", "<!-- bench_noop:end -->"
RECORDS = (".pypto_build/noop.marshal", ".pypto_build/noop.json")    # this tree's, and an older revision's


def entry_script(snapshot: Path, dest: Path) -> Path:
    """`dest`: the console script pip would write for the snapshot's `pypto-build` entry point."""
    spec = tomllib.loads((snapshot / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, func = spec["pypto-build"].split(":")
    dest.write_text(f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {func}\n"
                    "if __name__ == '__main__':\n"
                    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                    f"    sys.exit({func}())\n", encoding="utf-8")
    dest.chmod(0o755)
    return dest


def installed(work: Path) -> Path:
    """A venv with the working tree installed as a user installs it (a wheel, not editable: no editable
    finder at start-up), its dependencies taken from this interpreter's environment by a plain .pth line."""
    wheels, venv = work / "wheel", work / "installed"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(wheels), str(bb.REPO)], check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", *map(str, wheels.glob("pypto_build-*.whl"))], check=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "deps.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    return venv / "bin" / "pypto-build"


def record_stats(d: Path) -> dict:
    return {r: os.stat(d / r).st_mtime_ns for r in RECORDS if (d / r).exists()}


def measure(args) -> dict:
    work = Path(args.work).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    bb.use_package(bb.REPO)
    env = bb.bench_env(work)
    runner = bb.Runner(env, work)
    ninja, pypto = bb.find_ninja(), bb.find_pypto_build()
    src = bb.write_l2(work / "src", kernels=args.kernels)
    _, units = bb.units_of(src)
    outputs = [u.output for u in units]
    d, nd = bb.fresh_copy(src, work / "pypto"), bb.fresh_copy(src, work / "ninja")
    tools = {"ninja": None, "this tree, editable install": (runner, [pypto], d)}
    if args.installed:
        tools["this tree, installed from a wheel"] = (runner, [str(installed(work))], work / "pypto-installed")
    if args.against:
        old = bb.snapshot(args.against, work / "against")
        old_env = {**env, "PYTHONPATH": os.pathsep.join([str(old), *filter(None, [env.get("PYTHONPATH")])])}
        old_runner = bb.Runner(old_env, work)
        _, p = old_runner.run([sys.executable, "-c", "import pypto_build; print(pypto_build.__file__)"])
        if not Path(p.stdout.strip()).resolve().is_relative_to(old):
            raise bb.BenchError(f"{args.against}: pypto_build imported from {p.stdout.strip()}, not {old}")
        tools[args.against] = (old_runner, [str(entry_script(old, work / "pypto-build-against"))],
                               work / "pypto-against")

    bb.log(f"building {args.kernels} kernels with pypto-build -j 2 and ninja -j 2")
    runner.run([pypto, "build", "-q", "-j", "2", str(d)])
    bb.write_build_ninja(nd)
    runner.run([ninja, "-C", str(nd), "-j", "2"])
    dirs = {nd, *(tool[2] for tool in tools.values() if tool)}
    for copy in dirs - {d, nd}:                # its own copy (its own record): re-hashed once, never rebuilt
        shutil.copytree(d, copy, symlinks=True)
    time.sleep(bb.RACY_NS / 1e9 + 0.5)
    for name, tool in tools.items():           # untimed: each pypto-build records its no-op, ninja warms up
        for _ in range(2 if tool else 1):
            if tool:
                tool[0].run([*tool[1], "build", "-q", str(tool[2])])
            else:
                runner.run([ninja, "-C", str(nd)])
    before = {x: bb.output_mtimes(x, outputs) for x in dirs}
    records = {x: record_stats(x) for x in dirs - {nd}}
    times: dict[str, list] = {name: [] for name in tools}
    bb.wait_quiet()
    for _ in range(args.runs):
        for name, tool in tools.items():
            if tool is None:
                dt, p = runner.run([ninja, "-C", str(nd)])
                if "no work to do" not in p.stdout:
                    raise bb.BenchError(f"ninja no-op did work in {nd}:\n{p.stdout}")
            else:
                dt, p = tool[0].run([*tool[1], "build", "-q", str(tool[2])])
            times[name].append((dt, p.other_load))
    if any(bb.output_mtimes(x, outputs) != before[x] for x in dirs):
        raise bb.BenchError("a no-op rewrote outputs")
    after = {x: record_stats(x) for x in records}
    if after != records or not all(records.values()):
        raise bb.BenchError(f"a no-op went through doit (its record was rewritten): {records} -> {after}")
    return {"kernels": args.kernels, "runs": args.runs, "stats": {k: bb.stats(v) for k, v in times.items()},
            "command": shlex.join(["python", "bench/bench_noop.py", *sys.argv[1:]]),
            "load_start": args.load_start, "load_end": bb.load_avg(), "ninja": bb.first_line([ninja, "--version"]),
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "head": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=bb.REPO, capture_output=True,
                                   text=True).stdout.strip()}


def render(r: dict) -> str:
    ninja = r["stats"]["ninja"]["median"]
    lines = [BEGIN, "", f"## The no-op side by side with ninja ({r['kernels']:,} kernels)", "",
             f"Generated by `{r['command']}` ({r['date']}; working tree at {r['head']}; Python {r['python']}; "
             f"ninja {r['ninja']}; load average 1/5/15 min {r['load_start']} at start, {r['load_end']} at end: "
             "the machine was shared and loaded, so read the ratios rather than the times). "
             f"{r['runs']} rounds, each running every tool once in turn (interleaved); every ninja run said "
             "\"no work to do\", no output and no no-op record was rewritten.", "",
             "| | median | min | / ninja (medians) | other load, cores |", "|---|---|---|---|---|"]
    for name, s in r["stats"].items():
        label = "`ninja -C DIR`" if name == "ninja" else f"`pypto-build build -q DIR` ({name})"
        lines.append(f"| {label} | {bb.fmt(s['median'])} | {bb.fmt(s['min'])} | "
                     f"{'—' if name == 'ninja' else bb.ratio(s['median'], ninja)} | {bb.load(s)} |")
    return "\n".join([*lines, "", END]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", type=int, default=2048, help="kernels in the directory (default 2048)")
    ap.add_argument("--runs", type=int, default=21, help="interleaved rounds (default 21)")
    ap.add_argument("--against", metavar="REV", default=None, help="also time a snapshot of REV (e.g. main)")
    ap.add_argument("--installed", action="store_true",
                    help="also time the working tree installed from a wheel (as users install it), in a copy")
    ap.add_argument("--work", default=str(bb.REPO / "bench" / "out" / "bench_noop"),
                    help="scratch dir, emptied first (default bench/out/bench_noop, git-ignored)")
    ap.add_argument("--out", default="docs/benchmarks.md", help="the report whose bench_noop block is replaced")
    args = ap.parse_args(argv)
    args.load_start = bb.load_avg()
    r = measure(args)
    out = Path(args.out) if Path(args.out).is_absolute() else bb.REPO / args.out
    bb.put_block(out, "bench_noop", render(r))
    bb.log(f"wrote {out}")
    print(render(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
