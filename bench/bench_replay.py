#!/usr/bin/env python3
"""Replay with nothing changed, L2 and L3, now vs a baseline revision, beside the floor.

    python bench/bench_replay.py [--rounds 7] [--baseline-rev 300d0a4] [--out docs/benchmarks-loop.md]

On the shipped examples (host runtime: `matmul_relu`, L2, and `two_chips`, L3 on two ranks), built and
validated once per side, then timed interleaved (now, baseline, now, ...):

* one-shot: `python -m pypto_build replay --validate -q DIR` with nothing changed (a new process each time);
* the API: a new process that imports torch, makes golden.py's inputs and calls
  `DistributedCompiledProgram.from_dir(DIR)(*tensors)` twice; each call timed inside the process;
* the floor: `python -c "import torch"` — a one-shot run is a new process that needs torch (for golden.py's
  tensors and the runtime's), whatever it does besides.

Each figure is a median with its spread (min-max). The figures go into --out between the bench_replay
markers (the rest of the file is kept).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_build as bb  # noqa: E402  (same folder: python bench/bench_replay.py)

TAG = "bench_replay"
EXAMPLES = {"L2": "matmul_relu", "L3": "two_chips"}
# A new process: golden.py's inputs, then the program called twice (each call timed in the process).
API_CALLS = """
import json, sys, time, importlib.util
import torch
from pypto_build import DistributedCompiledProgram
root = sys.argv[1]
spec = importlib.util.spec_from_file_location("golden", root + "/golden.py")
golden = importlib.util.module_from_spec(spec)
spec.loader.exec_module(golden)
tensors = [value for _name, value in golden.generate_inputs(None)]
program = DistributedCompiledProgram.from_dir(root)
took = []
for _ in range(2):
    began = time.perf_counter()
    program(*tensors)
    took.append(time.perf_counter() - began)
print(json.dumps(took))
"""


def env_for(package_root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(package_root)
    env["PYPTO_BUILD_PLATFORM"] = "host"
    return env


def run(cmd: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    """`cmd`'s wall time and stdout; exits naming it when it fails."""
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return took, done.stdout


def fixture(package_root: Path, name: str, dest: Path) -> Path:
    """A copy of the example `name`, replayed and validated once by the package under `package_root`."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(package_root / "pypto_build" / "examples" / name, dest)
    run([sys.executable, "-m", "pypto_build", "replay", "--validate", "-q", str(dest)], env_for(package_root), dest)
    return dest


def measure(sides: dict[str, Path], work: Path, rounds: int) -> dict:
    """{side: {figure: [seconds]}}, the sides interleaved round by round."""
    dirs = {side: {kind: fixture(root, ex, work / f"{side}-{ex}") for kind, ex in EXAMPLES.items()}
            for side, root in sides.items()}
    times: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    floor: list[float] = []
    for _ in range(rounds):
        floor.append(run([sys.executable, "-c", "import torch"], env_for(sides["now"]), work)[0])
        for side, root in sides.items():
            env, got = env_for(root), times[side]
            for kind, path in dirs[side].items():
                cmd = [sys.executable, "-m", "pypto_build", "replay", "--validate", "-q", str(path)]
                got.setdefault(f"replay {kind}", []).append(run(cmd, env, path)[0])
            wall, out = run([sys.executable, "-c", API_CALLS, str(dirs[side]["L3"])], env, work)
            first, second = json.loads(out.strip().splitlines()[-1])
            got.setdefault("api process", []).append(wall)
            got.setdefault("api first call", []).append(first)
            got.setdefault("api second call", []).append(second)
        bb.log(f"round {len(floor)}/{rounds}")
    return {"times": times, "floor": floor}


WHERE = """Where the time went (before: `python -m cProfile -m pypto_build replay --validate DIR` for the tool's
process, and the run's child profiled in process): the child imports torch (~1.0 s of CPU, the floor), then each
rank worker was a new interpreter (`spawn`) importing torch again — two at once on two cores, ~1.1 s of wall
time before the first dispatch could run — and every interpreter with torch loaded spent ~0.3 s collecting
torch's objects as it left (the child's own exit is waited for; the ranks' exits made the driver's close ~0.4 s).
The program's own run (four dispatches) takes milliseconds. Now the rank workers are forked from one server
(multiprocessing's forkserver, torch imported once; the child starts it first, so its import overlaps the
child's own, and a program called again in one process reuses it), and the run's child freezes its objects
(`gc.freeze`) before it leaves. What is left of an L3 replay is the floor plus ~0.1 s; an API call after the
first is the program's run plus forking two workers."""

ROWS = (("replay L2", "one-shot `replay --validate`, L2 example (nothing changed)"),
        ("replay L3", "one-shot `replay --validate`, L3 example (two ranks, nothing changed)"),
        ("api process", "`DistributedCompiledProgram` process: torch, inputs, two calls"),
        ("api first call", "… its first call (`from_dir(d)(a, out)`)"),
        ("api second call", "… its second call, same process"))


def render(r: dict, args, took: float, rev: str) -> str:
    now, base = r["times"]["now"], r["times"]["base"]
    floor = bb.stats(r["floor"])
    lines = [f"<!-- {TAG}:begin -->", "", "## Replay with nothing changed, L2 and L3 (`bench/bench_replay.py`)", "",
             f"`python bench/bench_replay.py --rounds {args.rounds} --baseline-rev {args.baseline_rev}` "
             f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, {bb.cpu_model()}, "
             f"load average at start {bb.load_avg()}; the run took {took / 60:.1f} min). Host runtime; the two "
             f"sides interleaved, round by round. now: {rev}; before: {args.baseline_rev}.", "",
             "| | before | now | now / before |", "|---|---|---|---|"]
    for key, label in ROWS:
        b, n = bb.stats(base[key]), bb.stats(now[key])
        lines.append(f"| {label} | {bb.fmt_stat(b)} | {bb.fmt_stat(n)} | {bb.ratio(n['median'], b['median'])} |")
    lines += [f"| floor: a new process importing torch (`python -c \"import torch\"`) | | {bb.fmt_stat(floor)} | |",
              "", WHERE, "", f"<!-- {TAG}:end -->"]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--baseline-rev", default="300d0a4", help="the 'before' revision (default: main before the "
                    "L3 rank workers were forked from a server)")
    ap.add_argument("--work", type=Path, default=bb.REPO / "bench" / "out" / "bench_replay")
    ap.add_argument("--out", type=Path, default=bb.REPO / "docs" / "benchmarks-loop.md")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    started = time.time()
    sides = {"now": bb.REPO, "base": bb.snapshot(args.baseline_rev, args.work / "baseline")}
    result = measure(sides, args.work, args.rounds)
    block = render(result, args, time.time() - started, bb.git_state(None))
    bb.put_block(args.out, TAG, block)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
