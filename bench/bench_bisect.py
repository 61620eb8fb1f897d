#!/usr/bin/env python3
"""Which kernel broke it: the runs and the wall time of `pypto-build bisect --method trace|mix`, beside one run.

    PATH=<simpler venv>/bin:$PATH <simpler venv>/bin/python bench/bench_bisect.py [--rounds 3]

Two failing directories, each made once as a user makes one (built and validated: PASSED recorded; kernels
edited; validated again: FAILED recorded), then bisected from that same state in every round:

* host: `synth.write_l2(kernels=64, golden=True)`, three kernels edited, one so its numbers are wrong (its
  coefficient) and two harmlessly (a new exported variable: their binaries change, their numbers do not);
* a2a3sim (when simpler is importable, else skipped with the reason): simpler's `vector_example` as a PyPTO
  build directory with its real golden (`scene_dir.py`), `kernel_add_scalar` made to add one more, `kernel_add`
  changed harmlessly (`scene_dir.VECTOR_EDITS`).

Each round bisects a fresh copy (`cp -a`, a new path: a first bisect of that directory) with `--method trace`,
then the same copy again with `--method trace` (the good variant's dump is kept by the first: one run), then
another fresh copy with `--method mix`; each a whole `python -m pypto_build bisect ... --json` process, checked to
name the broken kernel's unit. Beside them, the floor: one run of the program as a whole process (`pypto-build
replay -q DIR`, nothing to build) and as the bisect timed its own runs (`runs[].seconds`, in process), and the
bisect's fixed costs measured alone: copying the directory (`shutil.copytree`, as its scratch does) and
building the copy (`pypto-build build -q COPY`, a whole process: nothing to compile). Medians (min–max) over
--rounds. Writes a block of docs/benchmarks.md (`bench_bisect` markers, kept when bench_build.py rewrites it; its anchor
`#bisect` is what the guide links).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform as _platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_build import cpu_model, fmt, load_avg, put_block, stats  # noqa: E402  (same folder)
from pypto_build.testing.synth import kernel_path, write_l2  # noqa: E402

KERNELS = 64
BROKEN, HARMLESS = 61, (10, 50)          # func_ids of the edits: each later kernel halves what came before,
#                                          so a wrong coefficient shows only near the end
TIMEOUT_S = 1800


def fs(s: dict | None) -> str:
    if not s:
        return "—"
    return fmt(s["median"]) if s["n"] == 1 else f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])}, n={s['n']})"


def counts(xs: list[int]) -> str:
    xs = sorted(xs)
    return str(xs[0]) if xs[0] == xs[-1] else f"{xs[len(xs) // 2]} ({xs[0]}–{xs[-1]})"


def environment(work: Path, host: bool) -> dict:
    """This checkout's pypto_build, the bench's own user cache (kept variants, bisect work folders), bytecode kept."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYPTO_BUILD_PLATFORM",
                                                            "PYPTO_BUILD_CACHE", "PYPTO_BUILD_REMOTE_CACHE")}
    env["PYTHONPATH"] = str(REPO)
    env["XDG_CACHE_HOME"] = str(work / "user-cache")
    if host:
        env["PYPTO_BUILD_PLATFORM"] = "host"
    return env


def pb(args: list[str], env: dict, ok: tuple[int, ...] = (0,)) -> tuple[float, subprocess.CompletedProcess]:
    """A whole `python -m pypto_build ...` process: (wall seconds, the result)."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pypto_build", *args], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    took = time.perf_counter() - began
    if done.returncode not in ok:
        raise SystemExit(f"pypto-build {' '.join(args)}: exit {done.returncode}\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")
    return took, done


def host_edits(root: Path) -> None:
    """Kernel BROKEN computes other numbers (its coefficient); the HARMLESS ones get a new exported variable."""
    path = kernel_path(root, BROKEN)
    text = path.read_text()
    assert text.count(f"{BROKEN + 1}.0f") == 1, path
    path.write_text(text.replace(f"{BROKEN + 1}.0f", f"{BROKEN + 1}.5f"))
    for func_id in HARMLESS:
        path = kernel_path(root, func_id)
        path.write_text(path.read_text().replace("using namespace pto;", "using namespace pto;\nextern \"C\" "
                                                 f"volatile int bench_harmless_{func_id} = 7;"))


def real_edits(root: Path) -> None:
    from scene_dir import VECTOR_EDITS, edit_kernels

    edit_kernels(root, VECTOR_EDITS)


class Case:
    """One failing directory and its rounds of bisects."""

    def __init__(self, name: str, work: Path, env: dict, culprit: str) -> None:
        self.name, self.work, self.env, self.culprit = name, work, env, culprit
        self.failing = work / name / "failing"
        self.res: dict[str, dict[str, list]] = {m: {"wall": [], "runs": [], "in_runs": [], "first": [],
                                                    "later": []}
                                                for m in ("trace", "trace again", "mix")}
        self.floor: dict[str, list] = {"replay": [], "copy": [], "build": []}
        self.suspects = 0
        self.notes: set[str] = set()

    def prepare(self, write, edits) -> None:
        shutil.rmtree(self.work / self.name, ignore_errors=True)
        (self.work / self.name).mkdir(parents=True)
        write(self.failing)
        pb(["validate", "-q", "-j", "2", str(self.failing)], self.env)
        edits(self.failing)
        pb(["validate", "-q", "-j", "2", str(self.failing)], self.env, ok=(1,))

    def fresh(self, label: str) -> Path:
        dest = self.work / self.name / label
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["cp", "-a", str(self.failing), str(dest)], check=True)
        return dest

    def bisect(self, root: Path, method: str, label: str) -> None:
        out = root.parent / f"{root.name}-{label.replace(' ', '-')}.json"
        took, done = pb(["bisect", str(root), "--method", method, "--json", str(out)], self.env)
        report = json.loads(out.read_text())
        named = [c["unit"] for c in report["culprits"]]
        if named != [self.culprit]:
            raise SystemExit(f"{self.name}: bisect --method {method} named {named}, not {self.culprit}\n{done.stdout}")
        runs = [r["seconds"] for r in report["runs"]]
        got = self.res[label]
        got["wall"].append(took)
        got["runs"].append(len(runs))
        got["in_runs"].append(sum(runs))
        got["first"].append(runs[0])
        got["later"].extend(runs[1:])
        self.suspects = len(report["suspects"])
        self.notes.update(report.get("notes", ()))
        print(f"  {self.name} {label}: {len(runs)} run(s), {fmt(took)} (runs {fmt(sum(runs))})", flush=True)

    def floors(self, i: int) -> None:
        root = self.fresh(f"floor-{i}")
        pb(["replay", "-q", str(root)], self.env)                 # the copy's first run re-hashes its files
        self.floor["replay"].append(pb(["replay", "-q", str(root)], self.env)[0])
        began = time.perf_counter()
        shutil.copytree(self.failing, root.with_name(f"copied-{i}"), symlinks=True)
        self.floor["copy"].append(time.perf_counter() - began)
        self.floor["build"].append(pb(["build", "-q", str(root.with_name(f"copied-{i}"))], self.env)[0])

    def round(self, i: int) -> None:
        root = self.fresh(f"trace-{i}")
        self.bisect(root, "trace", "trace")
        self.bisect(root, "trace", "trace again")
        self.bisect(self.fresh(f"mix-{i}"), "mix", "mix")
        self.floors(i)

    def summary(self) -> dict:
        out = {m: {"wall": stats(r["wall"]), "runs": r["runs"], "in_runs": stats(r["in_runs"]),
                   "beyond": stats([w - s for w, s in zip(r["wall"], r["in_runs"])])}
               for m, r in self.res.items()}
        first = [s for r in self.res.values() for s in r["first"]]
        later = [s for r in self.res.values() for s in r["later"]]
        return {"methods": out, "first": stats(first), "later": stats(later),
                "floor": {k: stats(v) for k, v in self.floor.items()}, "suspects": self.suspects}


def bound(n: int) -> tuple[int, int]:
    """(the issue's ⌈log₂ n⌉ + 2, search.py's: the two endpoints + ⌈log₂ n⌉ + 1) for one culprit among n."""
    log = math.ceil(math.log2(n)) if n > 1 else 0
    return log + 2, log + 3


def simpler_missing() -> str | None:
    if importlib.util.find_spec("simpler") is None or importlib.util.find_spec("simpler_setup") is None:
        return "simpler is not importable: run this with the simpler venv's python (docs/platforms.md)"
    if shutil.which("g++-15") is None:
        return "g++-15 is not on PATH: put the simpler venv's bin/ first on PATH"
    return None


def render(cases: dict, skipped: str | None, args, took: float, machine: list[str]) -> str:
    out = ["<!-- bench_bisect:begin -->", "", '<a id="bisect"></a>', "",
           "## Which kernel broke it: `pypto-build bisect` (`bench/bench_bisect.py`)", "",
           "Generated by `PATH=<simpler venv>/bin:$PATH <simpler venv>/bin/python bench/bench_bisect.py "
           f"--rounds {args.rounds}` (the whole run took {took / 60:.1f} min). " + " · ".join(machine)
           + f", at end {load_avg()} (the machine is shared: read the ratios rather than the times).", "",
           "Each directory is made failing once as a user makes it (validated: PASSED recorded; kernels edited; "
           "validated: FAILED recorded); every round bisects a fresh `cp -a` copy of that state (a first bisect of "
           "that directory) with `--method trace`, the same copy again with `--method trace` (the good variant's "
           "dump is kept: one run), and another fresh copy with `--method mix`. Each bisect is a whole "
           "`python -m pypto_build bisect DIR --method M --json FILE` process, checked to name the broken kernel's "
           "unit; *program runs* is the sum of its JSON's `runs[].seconds`, *beyond the runs* the rest of its wall "
           "time (interpreter start, the scratch copy and its build, fetching the good binaries, reading and "
           "comparing the dumps, the report). The run bound: the issue's ⌈log₂ n⌉ + 2 for one culprit among n "
           "suspects; the search's own (`culprits/search.py`) is the two endpoints + ⌈log₂ n⌉ + 1.", "",
           "Where the fixed costs go: a bisect's first run includes starting its warm run server (torch imported "
           "once; the later runs fork from it), and a trace needs torch in the bisect's own process too, to read "
           "golden.py's tolerance and compare the dumps: it is imported in the background while the copy builds "
           "and the program runs, so what is left beyond the runs is mostly reading and comparing the dumps; the "
           "mix's rest is the interpreter, the scratch copy and its build. A mix runs the current variant first; "
           "when the good variant's PASSED verdict was recorded on the very golden result that run was compared "
           "against (the usual case: validate PASSED, edit, validate FAILED, bisect), the good variant is not run "
           "again.", ""]
    labels = {"trace": "`--method trace` (first bisect of the copy)", "trace again":
              "`--method trace` again (good dump kept)", "mix": "`--method mix`"}
    for name, (title, edits, s) in cases.items():
        n = s["suspects"]
        issue, ours = bound(n)
        f = s["floor"]
        out += [f"### {title}", "", edits + f" {n} suspects (units whose binaries differ).", "",
                "| | runs | bisect wall time | program runs | beyond the runs | wall / one `replay -q` |",
                "|---|---|---|---|---|---|"]
        for m, r in s["methods"].items():
            out.append(f"| {labels[m]} | {counts(r['runs'])} | {fs(r['wall'])} | {fs(r['in_runs'])} | "
                       f"{fs(r['beyond'])} | {r['wall']['median'] / f['replay']['median']:.1f}× |")
        mix_runs = max(s["methods"]["mix"]["runs"])
        over = "not met: the search also runs both endpoints"
        out += ["", f"Runs of the mix against the bound for n = {n}: at most {mix_runs}; the issue's ⌈log₂ n⌉ + 2 "
                f"= {issue} ({'met' if mix_runs <= issue else over}); the "
                f"search's own bound {ours} ({'met' if mix_runs <= ours else 'not met'}).", "",
                "| the floor | time |", "|---|---|",
                f"| a bisect's first run (`runs[0].seconds`: includes starting its warm run server, which "
                f"imports torch once) | {fs(s['first'])} |",
                f"| a bisect's later runs (`runs[1:].seconds`: forked from the warm server) | {fs(s['later'])} |",
                f"| one run of the program, a whole process (`pypto-build replay -q DIR`, nothing to build) | "
                f"{fs(f['replay'])} |",
                f"| copying the directory (`shutil.copytree`, as the bisect's scratch) | {fs(f['copy'])} |",
                f"| building the copy (`pypto-build build -q COPY`, a whole process, nothing to compile) | "
                f"{fs(f['build'])} |", ""]
    if skipped:
        out += ["### a2a3sim (simpler's `vector_example`)", "", f"Skipped: {skipped}.", ""]
    return "\n".join(out + ["<!-- bench_bisect:end -->", ""])


def machine() -> list[str]:
    def first(cmd: list[str]) -> str:
        try:
            return (subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines() or ["?"])[0]
        except OSError:
            return "?"

    return [time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), f"{os.cpu_count()} cores, {cpu_model()}",
            f"Linux {_platform.release()}", f"Python {_platform.python_version()}",
            f"g++: {first(['g++', '--version'])}",
            f"pypto_build {first(['git', '-C', str(REPO), 'rev-parse', '--short', 'HEAD'])}",
            f"load average at start {load_avg()}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "bench_bisect")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md",
                    help="the report whose bench_bisect block is replaced")
    args = ap.parse_args()
    began = time.time()
    head = machine()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    cases: dict = {}
    host = Case("k64", args.work, environment(args.work, host=True), f"compile:aiv/main_incore_{BROKEN}_aiv")
    host.prepare(lambda root: write_l2(root, kernels=KERNELS, golden=True), host_edits)
    for i in range(args.rounds):
        host.round(i)
    cases["k64"] = (f"Host runtime, {KERNELS} kernels (`synth.write_l2(kernels={KERNELS}, golden=True)`)",
                    f"Edited: `main_incore_{BROKEN}_aiv` (its numbers: the culprit) and "
                    f"`main_incore_{HARMLESS[0]}_aiv`, `main_incore_{HARMLESS[1]}_aiv` (harmless binary changes).",
                    host.summary())
    skipped = simpler_missing()
    if skipped:
        print(f"a2a3sim part skipped: {skipped}", flush=True)
    else:
        from scene_dir import EXAMPLES, simpler_root, write_scene_dir

        real = Case("vector_example", args.work, environment(args.work, host=False), "compile:aiv/kernel_add_scalar")
        real.prepare(lambda root: write_scene_dir(root, simpler_root(), EXAMPLES["vector_example"]), real_edits)
        for i in range(args.rounds):
            real.round(i)
        cases["vector_example"] = ("a2a3sim: simpler's `vector_example` (3 kernels, real golden)",
                                   "Edited: `kernel_add_scalar` (adds one more: the culprit) and `kernel_add` "
                                   "(a harmless binary change).", real.summary())
    block = render(cases, skipped, args, time.time() - began, head)
    put_block(args.out, "bench_bisect", block)
    print(block)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
