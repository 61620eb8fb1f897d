#!/usr/bin/env python3
"""Real kernels on a2a3sim: pypto_build against PyPTO's own compile, on simpler's qwen3_14b_decode.

    PYPTO_SRC=<PyPTO checkout> PATH=<simpler venv>/bin:$PATH PYTHONPATH=<this checkout> \\
        <simpler venv>/bin/python bench/bench_real.py [--rounds 3] [--out docs/benchmarks-platforms.md]

The directory is made by `real_dir.py` from the kernels PyPTO generated for Qwen3-14B's decode (simpler's
example at the revision PyPTO pins: 16 aiv + 18 aic kernels and the orchestration). Per round, in one
folder (the orchestration is built with `-g`, so its bytes name its source's path), in alternating order:

* PyPTO: `compile_and_assemble`'s compile, with PyPTO's own code loaded from $PYPTO_SRC (its
  `KernelCompiler`, PTO-ISA resolver, cache names and stamp transaction): the orchestration and every kernel
  on a thread pool (`--pypto-workers`, default 2; PyPTO's own pool is min(64, 1 + kernels) threads), in this
  process (no interpreter start-up counted). Then, on that directory: pypto_build's first build (it compiles
  every unit once, by design, and must leave PyPTO's files as they were) and the no-op after it, each no-op
  timed beside what any no-op of that directory costs here at least (`floor`).
* pypto_build: a cold `build -j 2` of a fresh directory, then one-edit builds (a comment added to
  `kernels/aiv/rms_recip.cpp`) interleaved with a hand compile of that kernel with simpler's exact argv.

Every pypto_build time is a whole `python -m pypto_build` process. Every binary is compared with PyPTO's.
The store of precompiled preludes is the bench's own (`XDG_CACHE_HOME` under the work folder) and is emptied
before each cold and first build, so those build the preludes they use; the one-edit builds find them.
The figures go into --out between the bench_real markers (the rest of the file is kept).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

from bench_build import (BenchError, put_block, Runner, bench_env, cpu_model, fmt, load_avg, machine_busy,  # same folder
                         own_cpu, stats)
from real_dir import PLATFORM, RUNTIME, simpler_root, write_real_dir

REPO = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- bench_real:begin -->", "<!-- bench_real:end -->"
EDITED = "kernels/aiv/rms_recip.cpp"
STAMP = "cache/binary_context.json"
OUR_SETTINGS = ("PYPTO_BUILD_CACHE", "PYPTO_BUILD_REMOTE_CACHE", "PYPTO_BUILD_LAUNCHER", "PYPTO_BUILD_PLATFORM",
                "PYPTO_BUILD_PCH")
TARGETS = {"cold": 0.5, "edit": 0.8, "first": 0.5, "noop": 0.060}
QUIET_LOAD = 0.25           # other load (cores) at most, in every step, for figures that are not preliminary
FLOOR = ("import sys\n"            # the no-op record's load and its trees' comparison alone; prints the trees
         "from pypto_build.plan.noop_record import load, trees_unchanged\n"
         "record = load(sys.argv[1])\n"
         "if not (record and record.get('trees') and trees_unchanged(record, split=True)):\n"
         "    sys.exit(3)\n"
         "print('\\n'.join(tree[0] for tree in record['trees']))\n")


def missing() -> str | None:
    """Why this benchmark cannot run here, or None."""
    if importlib.util.find_spec("simpler_setup") is None:
        return ("needs PyPTO's runtime simpler importable: run it with the python of a venv made by "
                "tools/build-simpler.sh (docs/platforms.md, \"Building simpler locally\")")
    if shutil.which("g++-15") is None:
        return "needs g++-15 on PATH: put the simpler venv's bin/ first on PATH"
    src = os.environ.get("PYPTO_SRC")
    if not src or not (Path(src) / "python/pypto/runtime/kernel_compiler.py").is_file():
        return ("set PYPTO_SRC to a PyPTO checkout (e2d0f78ae6d7): PyPTO's side runs PyPTO's own compiler "
                "subclass, PTO-ISA resolver, cache names and stamp code from it")
    return None


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(*args: str, cwd: Path) -> tuple[int, str]:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False)
    return done.returncode, done.stdout.strip()


class Pypto:
    """PyPTO's pure-Python pieces of `compile_and_assemble` (python/pypto/runtime/device_runner.py), loaded from
    its checkout; the rest of that function is restated here, step for step (device_runner imports torch and
    PyPTO's C++ core)."""

    def __init__(self, src: Path):
        runtime = src / "python" / "pypto" / "runtime"
        self.revision = _git("rev-parse", "--short=12", "HEAD", cwd=src)[1]
        self.compilers = _load("pypto_kernel_compiler", runtime / "kernel_compiler.py")
        self.stamps = _load("pypto_binary_cache", runtime / "_binary_cache.py")
        self.pto_isa = _load("pypto_pto_isa", runtime / "pto_isa.py")
        self.names = _load("pypto_external_source", src / "python" / "pypto" / "_external_source.py")
        self.argv: dict[str, list[str]] = {}           # each source's command line, as simpler ran it

    def _record_argv(self, compiler) -> None:
        """Keep each command line simpler runs, by its last argument (the source), for the hand compile. A hook
        on simpler's one runner of compilers (`KernelCompiler._run_subprocess`): nothing else changes."""
        run = compiler._run_subprocess

        def recording(cmd: list[str], *args, **kwargs):
            self.argv[cmd[-1]] = list(cmd)
            return run(cmd, *args, **kwargs)
        compiler._run_subprocess = recording

    @staticmethod
    def _clean_revision(root: Path) -> str | None:
        """device_runner._clean_git_revision: HEAD of a clean checkout."""
        rc, head = _git("rev-parse", "HEAD", cwd=root)
        rc2, dirty = _git("status", "--porcelain=v1", "--untracked-files=normal", cwd=root)
        return head if rc == 0 and rc2 == 0 and head and not dirty else None

    def compile(self, work_dir: Path, workers: int) -> float:
        """compile_and_assemble's compile and stamp transaction on `work_dir`; its wall time."""
        start = time.perf_counter()
        with self.stamps.binary_context_lock(work_dir):
            config = _load("_kernel_config", work_dir / "kernel_config.py")
            runtime = getattr(config, "RUNTIME_CONFIG", {}).get("runtime", RUNTIME)
            pto_isa_root = self.pto_isa.ensure_pto_isa_root()
            compiler = self.compilers.KernelCompiler(platform=PLATFORM)
            self._record_argv(compiler)
            revisions = (self._clean_revision(Path(compiler.project_root)), self._clean_revision(Path(pto_isa_root)))
            context = (None if None in revisions else
                       self.stamps.BinaryCacheContext(PLATFORM, runtime, revisions[0], revisions[1]))
            self.stamps.prepare_binary_context(work_dir, context)
            cache = work_dir / "cache"

            def kernel(k: dict) -> None:
                target = self.names.kernel_binary_cache_path(cache, source=k["source"], core_type=k["core_type"],
                                                             func_id=k["func_id"], platform=PLATFORM, external=False)
                if target.exists():
                    return
                sidecar = Path(k["source"]).with_suffix(".so")
                raw = sidecar.read_bytes() if sidecar.exists() else None
                if raw is None:
                    raw = compiler.compile_incore(k["source"], core_type=k["core_type"], pto_isa_root=pto_isa_root,
                                                  runtime_name=runtime, extra_include_dirs=k.get("extra_include_dirs"))
                    _save(raw, sidecar)
                _save(raw, target)

            def orchestration() -> None:
                source = Path(config.ORCHESTRATION["source"])
                if (cache / f"orch_{source.stem}.bin").exists() or source.with_suffix(".so").exists():
                    return
                _save(compiler.compile_orchestration(runtime, str(source)), source.with_suffix(".so"))

            with ThreadPoolExecutor(max_workers=workers or min(64, 1 + len(config.KERNELS))) as pool:
                futures = [pool.submit(orchestration), *(pool.submit(kernel, k) for k in config.KERNELS)]
                for future in futures:
                    future.result()
            self.stamps.record_binary_context(work_dir, context)
        return time.perf_counter() - start


def _save(data: bytes, path: Path) -> None:
    """device_runner._save_binary: a temporary file beside it, then os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def binaries(root: Path) -> dict[str, bytes]:
    """Every binary both tools write where PyPTO reads it, and the stamp."""
    files = [*root.glob("cache/incore_*.bin"), *root.glob("orchestration/*.so"), root / STAMP]
    return {str(p.relative_to(root)): p.read_bytes() for p in files if p.is_file()}


def identities(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """(inode, mtime_ns, bytes) of every file PyPTO wrote: its binaries, its sidecars and its stamp."""
    files = [*root.glob("cache/*.bin"), *root.glob("kernels/*/*.so"), *root.glob("orchestration/*.so"),
             root / STAMP]
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in files}


class Bench:
    def __init__(self, work: Path, pypto: Pypto, workers: int, edits: int, noops: int):
        self.work, self.pypto, self.workers, self.edits, self.noops = work, pypto, workers, edits, noops
        env = bench_env(work)
        for name in OUR_SETTINGS:                    # a cache would restore, a launcher distribute: neither here
            env.pop(name, None)
        env["XDG_CACHE_HOME"] = str(work / "user-cache")     # the precompiled preludes' store: emptied by `fresh`
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])  # runs in `work`
        self.runner = Runner(env, work)
        _, p = self.runner.run([sys.executable, "-c", "import pypto_build; print(pypto_build.__file__)"])
        if Path(p.stdout.strip()).resolve().parent.parent != REPO:
            raise BenchError(f"the timed processes import pypto_build from {p.stdout.strip()}, not from {REPO}")
        self.root = simpler_root()
        self.times: dict[str, list] = {k: [] for k in ("pypto", "cold", "edit", "hand", "first", "noop", "python",
                                                       "floor", "git")}
        self.cpu: dict[str, list[float]] = {k: [] for k in self.times}     # CPU-seconds of ours and our children
        self.checks: list[str] = []          # one line per failed check; none: every binary identical
        self.counts: dict[str, int] = {}

    def timed(self, key: str, step):
        """Run `step()`, keep its wall time, the other processes' load and the CPU time it took; its result."""
        busy, own, start = machine_busy(), own_cpu(), time.perf_counter()
        result = step()
        dt, cpu = time.perf_counter() - start, own_cpu() - own
        self.times[key].append((dt, max(0.0, ((machine_busy() - busy) - cpu) / dt)))
        self.cpu[key].append(cpu)
        return result

    def pb(self, key: str, *args: str) -> str:
        """One timed `python -m pypto_build` process; its last output line."""
        _, p = self.timed(key, lambda: self.runner.run([sys.executable, "-m", "pypto_build", *args]))
        return (p.stdout.strip().splitlines() or [""])[-1]

    def fresh(self, folder: Path) -> None:
        """A new directory, and an empty store of precompiled preludes: a cold or first build builds them."""
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(self.work / "user-cache", ignore_errors=True)
        program = write_real_dir(folder, self.root)
        self.counts = {"kernels": len(program.kernels), "units": len(program.kernels) + 1}

    def pypto_side(self, folder: Path) -> dict[str, bytes]:
        self.fresh(folder)
        self.timed("pypto", lambda: self.pypto.compile(folder, self.workers))
        theirs, before = binaries(folder), identities(folder)
        last = self.pb("first", "build", "-j", "2", str(folder))               # (4) the first build of PyPTO's dir
        units = self.counts["units"]
        if not last.startswith(f"pypto-build: {units} compiled, 0 up to date"):
            self.checks.append(f"first build of PyPTO's directory: {last!r}")
        after = identities(folder)
        changed = sorted(k for k in before.keys() | after.keys() if k != STAMP and before.get(k) != after.get(k))
        same_stamp = STAMP in before and STAMP in after and before[STAMP][2] == after[STAMP][2]
        if changed or not same_stamp:
            self.checks.append(f"first build of PyPTO's directory: PyPTO's files changed: {changed or 'none'}; "
                               f"the stamp's bytes {'equal' if same_stamp else 'differ'}")
        for i in range(self.noops):                                            # (5) the no-op, and its floor
            self.pb("noop", "build", "-q", str(folder))
            if i:       # the first no-op decides by content and writes the record the floor reads
                self.floor(folder)
        return theirs

    def floor(self, folder: Path) -> None:
        """What any no-op of `folder` costs here at least, timed beside it: the interpreter's start
        (`python -c pass`); the no-op record's load and the stat comparison of the git checkouts it watches
        (pypto_build's own functions in a bare process, imports included; it must find them unchanged); and
        git's own check of those checkouts' tracked files (`git diff-files --quiet`, in C, one after another)."""
        self.timed("python", lambda: self.runner.run([sys.executable, "-c", "pass"]))
        _, p = self.timed("floor", lambda: self.runner.run([sys.executable, "-c", FLOOR, str(folder.resolve())]))
        roots = p.stdout.splitlines()
        self.timed("git", lambda: [self.runner.run(["git", "-C", root, "diff-files", "--quiet"]) for root in roots])

    def our_side(self, folder: Path) -> dict[str, bytes]:
        self.fresh(folder)
        self.pb("cold", "build", "-j", "2", str(folder))                       # (2) cold
        ours = binaries(folder)
        kernel = folder / EDITED
        output = folder / f"cache/incore_4_aiv_{kernel.stem}_{PLATFORM}.bin"
        for i in range(self.edits):                                            # (3) one edit vs a hand compile
            with kernel.open("a") as f:
                f.write(f"// bench_real edit {time.monotonic_ns()}\n")
            for step in (("edit", "hand") if i % 2 == 0 else ("hand", "edit")):
                if step == "edit":
                    last = self.pb("edit", "build", str(folder))
                    if not last.startswith(f"pypto-build: 1 compiled, {self.counts['units'] - 1} up to date"):
                        self.checks.append(f"one-edit build: {last!r}")
                else:
                    argv = list(self.pypto.argv[str(kernel)])
                    argv[argv.index("-o") + 1] = str(self.work / "hand.so")
                    self.timed("hand", lambda: self.runner.run(argv, cwd=self.root))
            if output.read_bytes() != (self.work / "hand.so").read_bytes():
                self.checks.append(f"one-edit build: {output.name} differs from the hand compile's bytes")
        return ours

    def round(self, r: int) -> None:
        folder = self.work / "qwen3_14b_decode"
        sides = (self.pypto_side, self.our_side) if r % 2 == 0 else (self.our_side, self.pypto_side)
        results = {side.__name__: side(folder) for side in sides}
        theirs, ours = results["pypto_side"], results["our_side"]
        differ = sorted(k for k in theirs.keys() | ours.keys() if theirs.get(k) != ours.get(k))
        if len(theirs) != self.counts["units"] + 1 or differ:
            self.checks.append(f"round {r + 1}: {len(theirs) - 1} PyPTO binaries; differing: {differ or 'none'}")


def versions(pypto: Pypto, root: Path) -> dict[str, str]:
    def first_line(cmd: list[str]) -> str:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
    return {"simpler": _git("rev-parse", "--short=12", "HEAD", cwd=root)[1],
            "PTO-ISA": _git("rev-parse", "--short=12", "HEAD", cwd=root / "build" / "pto-isa")[1],
            "PyPTO": pypto.revision, "g++-15": first_line(["g++-15", "--version"]),
            "pypto_build": _git("rev-parse", "--short=12", "HEAD", cwd=REPO)[1]}


def render(bench: Bench, args: argparse.Namespace, command: str, elapsed: float) -> str:
    s = {k: stats(v) for k, v in bench.times.items() if v}

    def row(name: str, key: str, target: str = "") -> str:
        x = s[key]
        load = "n/a" if x["other_load"] is None else f"{x['other_load']:.2f}"
        cpu = fmt(statistics.median(bench.cpu[key]))
        return (f"| {name} | {fmt(x['median'])} | {fmt(x['min'])} | {fmt(x['max'])} | {x['n']} | {cpu} | {load} |"
                f" {target} |")

    def vs(a: str, b: str, limit: float) -> str:
        got = s[a]["median"] / s[b]["median"]
        return f"{got:.2f}× (target ≤ {limit}×: {'met' if got <= limit else 'not met'})"

    noop = s["noop"]["median"]
    own = min(64, 1 + bench.counts["kernels"])
    workers = (f"PyPTO's own pool, min(64, 1 + kernels) = {own} threads" if not args.pypto_workers else
               f"{args.pypto_workers} threads (`--pypto-workers`; PyPTO's own pool, min(64, 1 + kernels) = {own} "
               "threads, starts every compile at once)")
    v = versions(bench.pypto, bench.root)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    units = bench.counts["units"]
    loads = [x["other_load"] for x in s.values() if x["other_load"] is not None]
    quiet = bool(loads) and max(loads) <= QUIET_LOAD
    lines = [
        BEGIN, "", "## Real kernels: qwen3-14b decode on a2a3sim (`bench/bench_real.py`)"
        + ("" if quiet else " — preliminary"), "",
        "```", command, "```", "",
        f"Machine: {cpu_model()}, {cores} cores; {_dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; load average "
        f"{load_avg()} at the end (this benchmark's own compiles included). "
        + (f"Quiet: at most {QUIET_LOAD} cores busy outside this benchmark during any step" if quiet else
           "**Preliminary: a shared machine, other developers' builds and tests were running**")
        + " (\"other load\": cores busy outside this benchmark during each step; \"CPU\": CPU time of the "
        "step's own processes, which load inflates less than wall time). "
        f"simpler {v['simpler']}, PTO-ISA {v['PTO-ISA']}, PyPTO {v['PyPTO']}, pypto_build {v['pypto_build']}; "
        f"`g++-15`: {v['g++-15']}. {args.rounds} rounds, {elapsed / 60:.0f} min in all.", "",
        f"The directory: simpler's `qwen3_14b_decode` example, {bench.counts['kernels']} PyPTO-generated kernels "
        f"(`kernels/aiv`, `kernels/aic`) and its generated orchestration, laid out as PyPTO writes a build "
        f"directory (`bench/real_dir.py`), {units} compile units. PyPTO: `compile_and_assemble`'s compile "
        f"(PyPTO's `KernelCompiler`, cache names and stamp transaction from its checkout) in this process, on "
        f"{workers}; pypto_build: whole `python -m pypto_build` processes.", "",
        "| step | median | min | max | n | CPU (median) | other load | against the target (medians) |",
        "|---|---|---|---|---|---|---|---|",
        row("PyPTO: cold compile of every unit (`compile_and_assemble`)", "pypto"),
        row("pypto_build: cold `build -j 2`", "cold", vs("cold", "pypto", TARGETS["cold"]) + " of PyPTO's"),
        row("pypto_build: one-edit `build` (a comment added to `rms_recip`)", "edit",
            vs("edit", "hand", TARGETS["edit"]) + " of a hand compile"),
        row("hand compile of `rms_recip` with simpler's exact argv", "hand"),
        row(f"pypto_build: first `build -j 2` of the directory PyPTO built ({units} compiled, by design)", "first",
            vs("first", "pypto", TARGETS["first"]) + " of PyPTO's cold"),
        row("pypto_build: no-op `build` on that directory", "noop",
            f"target ≤ {TARGETS['noop'] * 1000:.0f} ms: {'met' if noop <= TARGETS['noop'] else 'not met'}"),
        *([row("beside each no-op but the first: `python -c pass` (the interpreter's start)", "python"),
           row("beside it: the no-op record's load and the stat comparison of the checkouts it watches, alone "
               "(a bare process running pypto_build's functions)", "floor"),
           row("beside it: `git diff-files --quiet` in those checkouts (git's own check of their tracked files, "
               "in C)", "git")] if "floor" in s else []),
        "",
    ]
    if bench.checks:
        lines += ["**Checks that failed:**", "", *(f"* {c}" for c in bench.checks), ""]
    else:
        lines += [f"Checks, every round: all {units} binaries and the stamp `cache/binary_context.json` of "
                  "pypto_build's cold build byte-identical to PyPTO's; pypto_build's first build of PyPTO's "
                  f"directory compiled all {units} units, left every binary and sidecar PyPTO wrote as it was "
                  "(bytes, inode, mtime) and rewrote the stamp with the same bytes; each one-edit build compiled "
                  "one unit, to the hand compile's bytes.", ""]
    return "\n".join(lines + [END]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--edits", type=int, default=3, help="one-edit builds (and hand compiles) per round")
    parser.add_argument("--noops", type=int, default=5, help="no-op builds per round")
    parser.add_argument("--pypto-workers", type=int, default=2,
                        help="PyPTO's thread pool (default 2, the cores here; 0: PyPTO's own min(64, 1 + kernels))")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-platforms.md")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one, removed after)")
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"bench_real: skipped: {reason}")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-real-"))
    work.mkdir(parents=True, exist_ok=True)
    command = (f"PYPTO_SRC=<PyPTO checkout> PATH=<simpler venv>/bin:$PATH PYTHONPATH=. <simpler venv>/bin/python "
               f"bench/bench_real.py {shlex.join(sys.argv[1:])}").rstrip()
    start = time.perf_counter()
    try:
        bench = Bench(work, Pypto(Path(os.environ["PYPTO_SRC"])), args.pypto_workers, args.edits, args.noops)
        for r in range(args.rounds):
            print(f"bench_real: round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
            bench.round(r)
        block = render(bench, args, command, time.perf_counter() - start)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(block)
    put_block(args.out, "bench_real", block)
    return 1 if bench.checks else 0


if __name__ == "__main__":
    sys.exit(main())
