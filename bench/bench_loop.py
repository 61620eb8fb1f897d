#!/usr/bin/env python3
"""The edit loop, side by side: `pypto-build watch` vs one-shot `replay --validate` vs the physical limit.

    python bench/bench_loop.py [--rounds 7] [--baseline-rev 5e42729] [--out docs/benchmarks-loop.md]

On the shipped example (host runtime) and on a 64-kernel directory (`synth.write_l2`, golden.py),
in one run on one machine, each edit appending an exported function to one kernel (its binary
changes every time):

* by hand: that kernel's exact compile argv from the graph, run with subprocess (the floor of any tool);
* the physical limit: by hand + the program's run (median reported by watch's timed runs) + the
  comparison (`golden.mismatch` on the saved outputs, in process);
* one-shot: `python -m pypto_build replay --validate -q DIR` after the edit (a new process each time);
* watch: one `python -m pypto_build watch --validate DIR` process; edit -> new binary (the bench polls
  the binary's inode every millisecond) and edit -> verdict (the moment watch's verdict line is read);
* the one-shot build overhead (64 kernels): `python -m pypto_build build -q DIR` after the edit minus
  by hand, against the same for `--baseline-rev` (a `git archive` snapshot; runs interleaved).

Every figure is a median with its spread (min-max) over --rounds edits. Writes markdown to --out.
"""
from __future__ import annotations

import argparse
import os
import platform as _platform
import queue
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_build import cpu_model, line_matching, stats  # noqa: E402  (same folder: python bench/bench_loop.py)
from pypto_build.plan.graph import load_graph  # noqa: E402
from pypto_build.testing.synth import kernel_path, write_l2  # noqa: E402

WAIT_S = 300.0


def fmt(s: dict | float) -> str:
    if isinstance(s, dict):
        return f"{s['median'] * 1e3:.0f} ms ({s['min'] * 1e3:.0f}–{s['max'] * 1e3:.0f}, n={s['n']})"
    return f"{s * 1e3:.0f} ms"


PLATFORM = "host"           # --platform


def env_for(pythonpath: Path | None = None) -> dict:
    """Host platform; bytecode written and used (PYTHONDONTWRITEBYTECODE would make every side compile
    its modules from source on every run — a snapshot never gets its __pycache__)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYPTO_BUILD_PLATFORM"] = PLATFORM
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def edit(path: Path, n: int) -> None:
    """Append an exported function: the binary changes (a comment could leave it byte-identical)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f'\nextern "C" int pypto_bench_edit_{n}(void) {{ return {n}; }}\n')


def unit_for(root: Path, kernel: Path):
    graph = load_graph(root, PLATFORM)
    rel = kernel.relative_to(root).as_posix()
    for plan in graph.plans:
        for unit in plan.units:
            if unit.source == rel:
                return unit, plan
    raise SystemExit(f"{kernel}: no compile unit")


def by_hand(root: Path, kernel: Path, rounds: int) -> tuple[dict, str]:
    """The unit's exact argv, run by subprocess in its working directory (one warm-up, then `rounds`)."""
    unit, plan = unit_for(root, kernel)
    cwd = unit.cwd or str(root / unit.sub_rel)
    times = []
    for i in range(rounds + 1):
        start = time.perf_counter()
        subprocess.run(list(unit.argv), cwd=cwd, check=True, capture_output=True)
        if i:
            times.append(time.perf_counter() - start)
    return stats(times), " ".join(unit.argv)


def timed(cmd: list[str], cwd: Path, env: dict) -> float:
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return took


class Watch:
    """A watch process whose output lines are timestamped as they are read."""

    def __init__(self, root: Path, env: dict) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pypto_build", "watch", "--validate", "--runs", "5", "."],
                                     cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line.rstrip("\n")))

    def until(self, pattern: str) -> tuple[float, str]:
        return line_matching(self.lines, self.proc, pattern, WAIT_S)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def watch_rounds(root: Path, kernel: Path, output: Path, rounds: int) -> dict:
    w = Watch(root, env_for())
    try:
        w.until(r"^\[watch\] watching ")
        to_binary, to_verdict, program, split = [], [], [], []
        for i in range(rounds):
            time.sleep(0.5)
            before = os.stat(output).st_ino
            start = time.perf_counter()
            edit(kernel, 1000 + i)
            while True:
                try:
                    if os.stat(output).st_ino != before:
                        break
                except FileNotFoundError:
                    pass
                time.sleep(0.001)
            to_binary.append(time.perf_counter() - start)
            at, verdict = w.until(r"^   verdict ")
            if "PASSED" not in verdict:
                raise SystemExit(f"watch round failed: {verdict}")
            to_verdict.append(at - start)
            _, line = w.until(r"^   program ")
            program.append(float(re.search(r"program  ([\d.]+) ms median", line).group(1)) / 1e3)
            _, line = w.until(r"^   time ")
            split.append(line.strip())
    finally:
        w.stop()
    return {"binary": stats(to_binary), "verdict": stats(to_verdict), "program": stats(program), "split": split[-1]}


def compare_cost(root: Path) -> float:
    import torch

    from pypto_build.run.golden import mismatch

    out = torch.load(root / ".pypto_build" / "replay" / "out.pt")
    times = []
    for _ in range(21):
        start = time.perf_counter()
        mismatch(out, out.clone(), 1e-5, 1e-5)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fixture(name: str, work: Path) -> tuple[Path, Path]:
    """A fresh copy of the example or the 64-kernel directory, built and validated once; (root, kernel)."""
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    if name == "example":
        shutil.copytree(REPO / "pypto_build" / "examples" / "matmul_relu", root)
        kernel = sorted((root / "kernels").rglob("*.cpp"))[0]
    else:
        write_l2(root, kernels=64, golden=True)
        kernel = kernel_path(root, 32)
    timed([sys.executable, "-m", "pypto_build", "replay", "--validate", "-q", "-j", "2", str(root)], root, env_for())
    return root, kernel


def one_shot(root: Path, kernel: Path, rounds: int, verb: list[str], env: dict, tag: int) -> dict:
    times = []
    for i in range(rounds):
        edit(kernel, tag + i)
        times.append(timed([sys.executable, "-m", "pypto_build", *verb, "-q", str(root)], root, env))
    return stats(times)


def baseline_snapshot(rev: str, work: Path) -> Path:
    dest = work / f"baseline-{rev}"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "pypto_build"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def build_overheads(work: Path, rounds: int, rev: str, hand: dict) -> dict:
    """One-edit `build` on 64 kernels, now and at `rev`, interleaved (separate copies: state formats differ)."""
    base = baseline_snapshot(rev, work)
    now_root, now_kernel = fixture("k64-build-now", work)
    old_root = work / "k64-build-base"
    shutil.rmtree(old_root, ignore_errors=True)
    write_l2(old_root, kernels=64, golden=True)
    old_kernel = kernel_path(old_root, 32)
    timed([sys.executable, "-m", "pypto_build", "build", "-q", "-j", "2", str(old_root)], old_root, env_for(base))
    now, old = [], []
    for i in range(rounds):
        edit(now_kernel, 2000 + i)
        now.append(timed([sys.executable, "-m", "pypto_build", "build", "-q", str(now_root)], now_root, env_for()))
        edit(old_kernel, 2000 + i)
        old.append(timed([sys.executable, "-m", "pypto_build", "build", "-q", str(old_root)], old_root, env_for(base)))
    return {"now": stats(now), "base": stats(old), "over_now": stats(now)["median"] - hand["median"],
            "over_base": stats(old)["median"] - hand["median"]}


def machine() -> list[str]:
    gxx = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    return [f"| date | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} |",
            f"| cores | {os.cpu_count()} |", f"| CPU | {cpu_model()} |", f"| kernel | {_platform.release()} |",
            f"| Python | {_platform.python_version()} |", f"| g++ | {gxx} |", f"| pypto_build | {rev} |",
            f"| load average at start | {' / '.join(f'{x:.2f}' for x in os.getloadavg())} |"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--platform", default="host", help="host (default), or a2a3sim/a5sim where simpler is "
                    "installed: the example's real PTO-ISA kernels compiled as PyPTO + simpler do")
    ap.add_argument("--only", choices=("example", "k64"), default=None, help="one directory (and no build "
                    "overhead comparison)")
    ap.add_argument("--baseline-rev", default="5e42729", help="the revision whose one-shot build overhead is "
                    "'today's' (default: main before issue 14)")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "bench_loop")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-loop.md")
    args = ap.parse_args()
    global PLATFORM
    PLATFORM = args.platform
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    head = machine()
    results = {}
    for name in [args.only] if args.only else ("example", "k64"):
        root, kernel = fixture(name, args.work)
        unit, _plan = unit_for(root, kernel)
        hand, argv = by_hand(root, kernel, args.rounds)
        shot = one_shot(root, kernel, args.rounds, ["replay", "--validate"], env_for(), 100)
        loop = watch_rounds(root, kernel, root / unit.output, args.rounds)
        results[name] = {"kernel": kernel.relative_to(root).as_posix(), "argv": argv, "hand": hand, "shot": shot,
                         "watch": loop, "compare": compare_cost(root)}
        print(f"{name}: by hand {fmt(hand)}; one-shot {fmt(shot)}; watch binary {fmt(loop['binary'])}, "
              f"verdict {fmt(loop['verdict'])}", flush=True)
    overhead = None
    if "k64" in results:
        overhead = build_overheads(args.work, args.rounds, args.baseline_rev, results["k64"]["hand"])
        print(f"one-shot build (64 kernels): now {fmt(overhead['now'])}, {args.baseline_rev} {fmt(overhead['base'])}")
    args.out.write_text(render(results, overhead, args, head, time.time() - started), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def render(results: dict, overhead: dict, args, head: list[str], took: float) -> str:
    out = ["# Benchmarks: the edit loop (`pypto-build watch`)", "",
           f"Generated by `python bench/bench_loop.py --rounds {args.rounds} --baseline-rev {args.baseline_rev} "
           f"--platform {PLATFORM}{' --only ' + args.only if args.only else ''}` (the whole run took "
           f"{took / 60:.1f} min); re-run it to refresh this file. Platform `{PLATFORM}`; each edit appends an "
           "exported function to one kernel.", "",
           "The same loop on real programs (simpler's examples on a2a3sim, against simpler's own scene test and "
           "`chip.run`): [benchmarks-loop-real.md](benchmarks-loop-real.md), by `bench/bench_loop_real.py`.", "",
           "## Machine", "", "| | |", "|---|---|", *head, "", "## Edit → verdict", "",
           "| directory | by hand (compile) | physical limit (compile + run + compare) | one-shot `replay --validate` "
           "| watch: edit → new binary | watch: edit → verdict |", "|---|---|---|---|---|---|"]
    goals = []
    for name, r in results.items():
        limit = r["hand"]["median"] + r["watch"]["program"]["median"] + r["compare"]
        w = r["watch"]
        out.append(f"| {name} (`{r['kernel']}`) | {fmt(r['hand'])} | {fmt(limit)} | {fmt(r['shot'])} | "
                   f"{fmt(w['binary'])} | {fmt(w['verdict'])} |")
        b, v = w["binary"]["median"], w["verdict"]["median"]
        goals.append(f"| {name}: watch edit → new binary within 1.25× of by hand | {fmt(b)} vs {fmt(r['hand']['median'])}: "
                     f"{b / r['hand']['median']:.2f}× | **{'met' if b <= 1.25 * r['hand']['median'] else 'not met'}** |")
        goals.append(f"| {name}: watch edit → verdict within by hand + run + 100 ms | {fmt(v)} vs {fmt(limit + 0.1)}: "
                     f"{v - limit:+.3f} s over the limit | **{'met' if v <= limit + 0.1 else 'not met'}** |")
        goals.append(f"| {name}: watch vs one-shot, edit → verdict | {fmt(v)} vs {fmt(r['shot']['median'])}: "
                     f"{r['shot']['median'] / v:.1f}× faster | |")
    if overhead is None:
        return "\n".join(out + ["", "## Goals", "", "| goal | measured | verdict |", "|---|---|---|", *goals, "",
                                "## Commands", "", *(f"- {n} by hand: `{r['argv']}`" for n, r in results.items()),
                                ""])
    over_now, over_base = overhead["over_now"], overhead["over_base"]
    goals.append(f"| one-shot one-edit `build` (64 kernels): overhead beyond by hand ≤ half of {args.baseline_rev}'s | "
                 f"{fmt(over_now)} vs {fmt(over_base)}: {over_now / over_base:.2f}× | "
                 f"**{'met' if over_now <= over_base / 2 else 'not met'}** |")
    out += ["", "Watch's last round split, per directory: " +
            "; ".join(f"{n}: `{r['watch']['split']}`" for n, r in results.items()) + ".", "",
            "Program run (median of watch's timed runs per round): " +
            "; ".join(f"{n}: {fmt(r['watch']['program'])}" for n, r in results.items()) +
            "; comparison (in process): " + "; ".join(f"{n}: {r['compare'] * 1e3:.2f} ms" for n, r in results.items()),
            "", "## One-shot one-edit build (64 kernels)", "",
            "| | `build` after the edit | overhead beyond by hand |", "|---|---|---|",
            f"| now | {fmt(overhead['now'])} | {fmt(over_now)} |",
            f"| {args.baseline_rev} (before issue 14) | {fmt(overhead['base'])} | {fmt(over_base)} |", "",
            "## Goals", "", "| goal | measured | verdict |", "|---|---|---|", *goals, "",
            "## Commands", "", *(f"- {n} by hand: `{r['argv']}`" for n, r in results.items()), ""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
