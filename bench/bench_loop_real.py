#!/usr/bin/env python3
"""The edit loop on real programs: simpler's own examples on a2a3sim, each figure beside its floor.

    PATH=<simpler venv>/bin:$PATH <simpler venv>/bin/python bench/bench_loop_real.py [--rounds 3] [--quick]
        [--examples benchmark_bgemm,vector_example] [--out docs/benchmarks-loop-real.md]

For each example (`scene_dir.py` writes the build directory: simpler's sources, a golden.py calling the example's
own generate_args / compute_golden), in one run, everything through `python -m pypto_build` processes (this
checkout's pypto_build), every figure the median (min–max) over --rounds:

1. cold: `replay --validate DIR` on a fresh copy (no .pypto_build, an empty store of precompiled preludes) against
   simpler's own scene test of the example with its kernel cache (build/cache/kernels) cleared, interleaved,
   and the scene test again with its cache warm (simpler's cache is set aside first and given back at the end);
2. edit -> verdict, one-shot: one kernel edited so its binary changes, then `replay --validate DIR`; floor: that
   kernel's compile by the graph's exact argv (in a scratch copy) + the run, as simpler's own [TIMING] span of
   `chip.run` in that replay, and as a bare run of the built program through simpler's API (bare_run.py);
3. edit -> verdict with one `watch --validate --runs 1 DIR` process (the moment its verdict line is read); floor:
   the same hand compile + the `chip.run` span of that round;
4. `validate DIR` with nothing changed;
5. the state: `du` of DIR/.pypto_build and its parts after a replay, with and without PYPTO_BUILD_KEEP_REPLAY=0,
   beside the bytes of the program's inputs and outputs.

The issue's goals: edit -> verdict <= 1.15 x (compile + run); cold replay <= simpler's cold scene test.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

from bench_build import BenchError, Runner, fmt, stats      # same folder
from loop_real_parts import (HandCompile, Pb, SimplerCache, Watch, bare_run, chip_run, edit, environment, machine,
                             missing, scene_test, sizes, state_sizes)
from scene_dir import EXAMPLES, simpler_root, write_scene_dir

REPO = Path(__file__).resolve().parent.parent
EDITED = {"benchmark_bgemm": "kernels/aic/kernel_gemm_tile.cpp", "vector_example": "kernels/aiv/kernel_add.cpp"}
GOAL_EDIT, GOAL_COLD = 1.15, 1.0


def fs(s: dict | None) -> str:
    """A median with its spread and the others' load, e.g. `9.81 s (9.70–10.2, n=3)`."""
    if not s:
        return "—"
    if s["n"] == 1:
        return fmt(s["median"])
    return f"{fmt(s['median'])} ({fmt(s['min'])}–{fmt(s['max'])}, n={s['n']})"


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def say(line: str) -> None:
    print(line, flush=True)


class Example:
    """One example's rounds; every list holds (seconds, other load) pairs or plain seconds."""

    def __init__(self, name: str, work: Path, runner: Runner, cache: SimplerCache, simpler: Path):
        self.name, self.runner, self.cache, self.simpler = name, runner, cache, simpler
        self.pb = Pb(runner)
        self.work = work / name
        shutil.rmtree(self.work, ignore_errors=True)
        self.src = self.work / "src"
        self.work.mkdir(parents=True)
        write_scene_dir(self.src, simpler, EXAMPLES[name])
        self.kernel = EDITED[name]
        self.t: dict[str, list] = {k: [] for k in ("cold", "cold_run", "cold_nopch", "scene_cold", "scene_warm", "shot", "shot_run",
                                                   "hand", "bare", "bare_run", "watch", "watch_run", "watch_hand",
                                                   "noop")}
        self.verdicts: dict[str, set] = {"pypto_build": set(), "simpler": set()}
        self.state: dict[str, dict] = {}
        self.tag = 0

    def fresh(self, label: str) -> Path:
        root = self.work / label
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(self.src, root)
        shutil.rmtree(Path(self.runner.env["XDG_CACHE_HOME"]), ignore_errors=True)
        return root

    def cold_rounds(self, rounds: int) -> None:
        """Interleaved, after one untimed run of each (bytecode, the page cache: warm for both sides)."""
        self.pb.run("replay", "--validate", str(self.fresh("cold")))
        scene_test(self.runner, self.simpler, self.name, EXAMPLES[self.name].case)
        for i in range(rounds):
            steps = [self.ours_cold, self.theirs] if i % 2 == 0 else [self.theirs, self.ours_cold]
            for step in steps:
                step(i)

    def ours_cold(self, i: int) -> None:
        root = self.fresh("cold")
        t, verdict, out = self.pb.run("replay", "--validate", str(root))
        self.t["cold"].append(t)
        self.t["cold_run"].append(chip_run(out))
        self.verdicts["pypto_build"].add(verdict)
        if i == 0:
            self.state["default"] = state_sizes(root)
            self.cold_tasks = [m.group(1) for m in re.finditer(r"^(\w+:\S+)  \(", out, re.M)]
        say(f"  cold replay --validate {fmt(t[0])} (chip.run {fmt(chip_run(out))}, {verdict}, others' load "
            f"{t[1]:.2f})")
        t, _, _ = self.pb.run("replay", "--validate", "--no-pch", str(self.fresh("cold")))
        self.t["cold_nopch"].append(t)
        say(f"  cold replay --validate --no-pch {fmt(t[0])} (others' load {t[1]:.2f})")

    def theirs(self, i: int) -> None:
        self.cache.clear()
        t, verdict = scene_test(self.runner, self.simpler, self.name, EXAMPLES[self.name].case)
        self.t["scene_cold"].append(t)
        self.verdicts["simpler"].add(verdict)
        warm, _ = scene_test(self.runner, self.simpler, self.name, EXAMPLES[self.name].case)
        self.t["scene_warm"].append(warm)
        say(f"  simpler's scene test: cold {fmt(t[0])}, warm {fmt(warm[0])} ({verdict}, others' load {t[1]:.2f})")

    def loop_dir(self) -> tuple[Path, HandCompile]:
        root = self.fresh("loop")
        self.pb.run("replay", "--validate", str(root))
        hand = HandCompile(root, self.kernel, self.work / "scratch")
        self.argv = hand.shown
        return root, hand

    def shot_rounds(self, root: Path, hand: HandCompile, rounds: int) -> None:
        for i in range(rounds):
            self.tag += 1
            edit(root / self.kernel, self.tag)
            if i % 2:
                self.t["hand"].append(hand.run(self.runner))
            t, verdict, out = self.pb.run("replay", "--validate", str(root))
            if i % 2 == 0:
                self.t["hand"].append(hand.run(self.runner))
            self.t["shot"].append(t)
            self.t["shot_run"].append(chip_run(out))
            self.verdicts["pypto_build"].add(verdict)
            bare, bare_chip = bare_run(self.runner, root)
            self.t["bare"].append(bare)
            self.t["bare_run"].append(bare_chip)
            say(f"  edit -> verdict (replay --validate) {fmt(t[0])}; floor: compile {fmt(self.t['hand'][-1][0])} + "
                f"chip.run {fmt(chip_run(out))} = {fmt(self.t['hand'][-1][0] + (chip_run(out) or 0))}; bare run "
                f"{fmt(bare[0])} (its chip.run {fmt(bare_chip)})")

    def watch_rounds(self, root: Path, hand: HandCompile, rounds: int) -> None:
        w = Watch(root, self.runner.env)
        try:
            w.until(r"^\[watch\] watching ")
            for _ in range(rounds):
                time.sleep(0.5)
                self.tag += 1
                start = time.perf_counter()
                edit(root / self.kernel, self.tag)
                at, line = w.until(r"^   verdict ")
                self.t["watch"].append(at - start)
                self.verdicts["pypto_build"].add("PASSED" if "PASSED" in line else "FAILED (golden mismatch)"
                                                 if "does not match golden" in line else line.strip())
                w.until(r"^   time ")
                self.t["watch_run"].append(w.chip_run_after(start))
                self.t["watch_hand"].append(hand.run(self.runner))
                say(f"  edit -> verdict (watch) {fmt(at - start)}; floor: compile {fmt(self.t['watch_hand'][-1][0])}"
                    f" + chip.run {fmt(self.t['watch_run'][-1])}")
        finally:
            w.stop()

    def noop_rounds(self, root: Path, rounds: int) -> None:
        for _ in range(rounds):
            t, verdict, out = self.pb.run("validate", str(root))
            self.t["noop"].append(t)
            self.noop_reason = next((line.strip() for line in out.splitlines() if line.startswith("validate:")),
                                    "the last verdict reused")
        say(f"  validate, nothing changed: {fs(stats(self.t['noop']))} ({self.noop_reason})")

    def state_rounds(self) -> None:
        root = self.fresh("keep0")
        env = dict(self.runner.env, PYPTO_BUILD_KEEP_REPLAY="0")
        self.pb.run("replay", "--validate", str(root), env=env)
        self.state["keep0"] = state_sizes(root)
        self.data = sizes(self.runner, root)
        shutil.rmtree(root)
        for k, s in self.state.items():
            say(f"  .pypto_build ({k}): {mb(s['total'])} (golden {mb(s['golden'])}, replay {mb(s['replay'])}, "
                f"state {mb(s['state'])}); inputs {mb(self.data['inputs'])}, outputs {mb(self.data['outputs'])}")

    def run(self, rounds: int) -> None:
        say(f"{self.name} ({EXAMPLES[self.name].case}), edited kernel {self.kernel}:")
        self.cold_rounds(rounds)
        root, hand = self.loop_dir()
        self.shot_rounds(root, hand, rounds)
        self.watch_rounds(root, hand, rounds)
        self.noop_rounds(root, rounds)
        self.state_rounds()
        shutil.rmtree(self.work / "cold", ignore_errors=True)


def summary(e: Example) -> dict:
    s = {k: stats([x for x in v if x is not None]) if any(x is not None for x in v) else None for k, v in e.t.items()}
    floors = {
        "shot": stats([h[0] + r for h, r in zip(e.t["hand"], e.t["shot_run"]) if r is not None]),
        "shot_bare": stats([h[0] + b[0] for h, b in zip(e.t["hand"], e.t["bare"])]),
        "watch": stats([h[0] + r for h, r in zip(e.t["watch_hand"], e.t["watch_run"]) if r is not None]),
    }
    return {"s": s, "floors": floors}


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def render(examples: list[Example], head: list, command: str, took: float, quick: bool) -> str:
    out = ["# Benchmarks: the edit loop on real programs (simpler's examples on a2a3sim)", ""]
    if quick:
        out += ["> **A `--quick` run (one round each): a first look, not figures to quote.** Re-run without "
                "`--quick` for medians over several rounds.", ""]
    out += [f"Generated by `{command}` (the whole run took {took / 60:.1f} min); re-run it to refresh this file. "
            "Each build directory is written by `bench/scene_dir.py` from simpler's example (its sources, and a "
            "golden.py calling the example's own `generate_args` / `compute_golden`). Every pypto_build figure is "
            "a whole `python -m pypto_build` process of this checkout; figures are medians (min–max, n rounds). "
            "*Others' load*: the mean number of cores busy with processes outside the benchmark during those "
            "runs (2 cores here; for the watch row: during the hand compiles of its rounds, watch itself idle).", "", "## Machine", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in head),
            ""]
    goals = []
    for e in examples:
        r = summary(e)
        s, fl = r["s"], r["floors"]
        load = lambda k: f"{s[k]['other_load']:.2f}" if s[k] and s[k]["other_load"] is not None else "—"  # noqa
        out += [f"## {e.name} ({EXAMPLES[e.name].case})", "",
                f"Verdicts: pypto_build {', '.join(sorted(e.verdicts['pypto_build']))}; simpler's scene test "
                f"{', '.join(sorted(e.verdicts['simpler']))}. Edited kernel: `{e.kernel}` (each edit appends an "
                "exported function, so its binary changes).", "",
                "| step | pypto_build | floor / reference | ratio | others' load |", "|---|---|---|---|---|",
                f"| cold `replay --validate` (fresh copy, empty prelude store) | {fs(s['cold'])} | simpler's scene test, "
                f"kernel cache cleared: {fs(s['scene_cold'])} | {s['cold']['median'] / s['scene_cold']['median']:.2f}× "
                f"| {load('cold')} / {load('scene_cold')} |",
                f"| (reference) | | simpler's scene test, kernel cache warm: {fs(s['scene_warm'])} | "
                f"{s['cold']['median'] / s['scene_warm']['median']:.2f}× | {load('scene_warm')} |",
                f"| (the cold replay's own `chip.run`) | {fs(s['cold_run'])} | | | |",
                f"| (the same without precompiled preludes, `--no-pch`) | {fs(s['cold_nopch'])} | | | |",
                f"| (what the cold replay ran) | {', '.join(f'`{t}`' for t in e.cold_tasks)} | | | |",
                f"| edit → verdict, `replay --validate` | {fs(s['shot'])} | compile {fs(s['hand'])} + `chip.run` "
                f"{fs(s['shot_run'])} = {fs(fl['shot'])} | {s['shot']['median'] / fl['shot']['median']:.2f}× | "
                f"{load('shot')} |",
                f"| (second floor) | | compile + bare run (simpler's API, init→close) {fs(s['bare'])} = "
                f"{fs(fl['shot_bare'])} (the bare run's `chip.run`: {fs(s['bare_run'])}) | "
                f"{s['shot']['median'] / fl['shot_bare']['median']:.2f}× | {load('bare')} |",
                f"| edit → verdict, `watch --validate` | {fs(s['watch'])} | compile {fs(s['watch_hand'])} + "
                f"`chip.run` {fs(s['watch_run'])} = {fs(fl['watch'])} | "
                f"{s['watch']['median'] / fl['watch']['median']:.2f}× | {load('watch_hand')} |",
                f"| `validate`, nothing changed | {fs(s['noop'])} | {e.noop_reason} | | {load('noop')} |", "",
                "The compile floor is the kernel's own command line (the graph's argv, as simpler runs it), without "
                "the precompiled prelude pypto_build adds where it has one; so pypto_build's own compile can be "
                "faster than this floor.", ""]
        d = e.data
        out += ["| `.pypto_build` after one replay --validate | total | golden/ | replay/ | state/ | the rest |",
                "|---|---|---|---|---|---|",
                *(f"| {label} | {mb(st['total'])} | {mb(st['golden'])} | {mb(st['replay'])} | {mb(st['state'])} | "
                  f"{mb(st['rest'])} |" for label, st in (("default", e.state["default"]),
                                                          ("PYPTO_BUILD_KEEP_REPLAY=0", e.state["keep0"]))),
                "", f"The program's data: inputs (In, InOut tensors) {mb(d['inputs'])}, outputs (Out, InOut) "
                f"{mb(d['outputs'])}, {mb(d['inputs'] + d['outputs'])} together.", "",
                f"Hand compile argv (run in a scratch copy): `{e.argv}`", ""]
        for what, key, floor in (("replay --validate", "shot", fl["shot"]), ("watch --validate", "watch", fl["watch"])):
            x = s[key]["median"] / floor["median"]
            goals.append(f"| {e.name}: edit → verdict ({what}) ≤ {GOAL_EDIT}× (compile + `chip.run`) | "
                         f"{fmt(s[key]['median'])} vs {fmt(floor['median'])}: {x:.2f}× | {verdict(x <= GOAL_EDIT)} |")
        x = s["cold"]["median"] / s["scene_cold"]["median"]
        goals.append(f"| {e.name}: cold `replay --validate` ≤ simpler's cold scene test | {fmt(s['cold']['median'])} "
                     f"vs {fmt(s['scene_cold']['median'])}: {x:.2f}× | {verdict(x <= GOAL_COLD)} |")
        st, bound = e.state["default"], d["inputs"] + 2 * d["outputs"]
        kept = st["golden"] + st["replay"]
        goals.append(f"| {e.name}: golden/ + replay/ at most one copy of the inputs and two of the outputs (the "
                     f"golden's, the last replay's) | {mb(kept)} vs {mb(bound)}: {kept / bound:.2f}× | "
                     f"{verdict(kept <= bound)}{' (du counts whole 4 kB blocks per file)' if bound < 1e6 else ''} |")
        goals.append(f"| {e.name}: no replay tensors with PYPTO_BUILD_KEEP_REPLAY=0 | replay/ {mb(e.state['keep0']['replay'])}"
                     f" | {verdict(e.state['keep0']['replay'] <= 4096)} |")
    return "\n".join(out + ["## Goals (issue 35)", "", "| goal | measured | verdict |", "|---|---|---|", *goals, ""])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one round (for trying the script)")
    ap.add_argument("--examples", default="benchmark_bgemm,vector_example",
                    help=f"comma-separated, of {', '.join(EXAMPLES)}")
    ap.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "bench_loop_real")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-loop-real.md")
    args = ap.parse_args()
    why = missing()
    if why:
        sys.exit(f"bench_loop_real: {why}")
    names = [n for n in args.examples.split(",") if n]
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        sys.exit(f"bench_loop_real: unknown example {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    rounds = 1 if args.quick else args.rounds
    args.work.mkdir(parents=True, exist_ok=True)
    started, load = time.time(), os.getloadavg()
    simpler = simpler_root()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # simpler's kernel cache is given back on the way out
    runner = Runner(environment(args.work), args.work)
    head = machine(simpler, load)
    done = []
    try:
        with SimplerCache(simpler) as cache:
            for name in names:
                e = Example(name, args.work, runner, cache, simpler)
                e.run(rounds)
                done.append(e)
    except BenchError as exc:
        sys.exit(f"bench_loop_real: {exc}")
    command = ("PATH=<simpler venv>/bin:$PATH <simpler venv>/bin/python bench/bench_loop_real.py "
               + ("--quick" if args.quick else f"--rounds {rounds}") + f" --examples {','.join(names)}")
    args.out.write_text(render(done, head, command, time.time() - started, args.quick), encoding="utf-8")
    say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
