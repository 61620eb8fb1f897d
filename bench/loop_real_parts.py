"""The pieces bench_loop_real.py puts together: simpler's kernel cache, its scene test, the hand compile, watch.

Everything here drives processes (pypto_build through its CLI, simpler's pytest, g++ by the graph's argv) and
reads what they print; the only pypto_build API used is the graph, for a unit's exact argv and output.
"""
from __future__ import annotations

import json
import os
import platform as _platform
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench_build import BenchError, Runner, cpu_model, line_matching      # same folder

REPO = Path(__file__).resolve().parent.parent
BARE = Path(__file__).resolve().parent / "bare_run.py"
PLATFORM = "a2a3sim"
OUR_SETTINGS = ("PYPTO_BUILD_CACHE", "PYPTO_BUILD_REMOTE_CACHE", "PYPTO_BUILD_LAUNCHER", "PYPTO_BUILD_PLATFORM",
                "PYPTO_BUILD_PCH", "PYPTO_BUILD_KEEP_REPLAY")
WAIT_S = 600.0
_CHIP_RUN = re.compile(r"name=chip\.run ts=\d+ dur=(\d+)")


def missing() -> str | None:
    """Why this benchmark cannot run here, or None."""
    import importlib.util

    if importlib.util.find_spec("simpler_setup") is None or importlib.util.find_spec("torch") is None:
        return "needs simpler and torch importable: run it with the simpler venv's python"
    if shutil.which("g++-15") is None:
        return "needs g++-15 on PATH: put the simpler venv's bin/ first on PATH"
    return None


def environment(work: Path) -> dict:
    """Every process's environment: this checkout's pypto_build, no artefact cache or launcher, the precompiled
    preludes' store under `work` (emptied before every cold replay), bytecode where Python keeps it (an empty
    PYTHONPYCACHEPREFIX would make the first process compile torch from source, and golden.py's first result
    would not be kept: files it read changed while it ran)."""
    env = {k: v for k, v in os.environ.items()
           if k not in OUR_SETTINGS and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(REPO)
    env["XDG_CACHE_HOME"] = str(work / "user-cache")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def chip_run(text: str) -> float | None:
    """simpler's own span of `chip.run` (its [TIMING] line), in seconds: the first one in `text`."""
    m = _CHIP_RUN.search(text)
    return int(m.group(1)) / 1e9 if m else None


def edit(path: Path, n: int) -> None:
    """Append an exported function: the kernel's binary changes (a comment could leave it byte-identical)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f'\nextern "C" int pypto_bench_edit_{n}(void) {{ return {n}; }}\n')


class Pb:
    """`python -m pypto_build VERB ... DIR` processes, timed whole, and verdicts read from what they print."""

    def __init__(self, runner: Runner):
        self.runner = runner

    def run(self, *args: str, env: dict | None = None) -> tuple[tuple[float, float], str, str]:
        """((wall, other load), verdict, output) of one process; a failure other than a golden mismatch stops."""
        cmd = [sys.executable, "-m", "pypto_build", *args]
        saved = self.runner.env
        self.runner.env = env or saved
        try:
            dt, p = self.runner.run(cmd, check=False)
        finally:
            self.runner.env = saved
        out = p.stdout + p.stderr
        verdict = ("PASSED" if p.returncode == 0 else
                   "FAILED (golden mismatch)" if p.returncode == 1 and "does not match golden" in out else None)
        if verdict is None:
            raise BenchError(f"{' '.join(cmd)} exited {p.returncode}:\n{out[-3000:]}")
        return (dt, p.other_load), verdict, out


class SimplerCache:
    """simpler's persistent kernel cache (build/cache/kernels): set aside on entry, given back on exit; `clear`
    removes the one the bench's own scene tests made (a cold scene test)."""

    def __init__(self, simpler: Path):
        self.folder = simpler / "build" / "cache" / "kernels"
        self.saved = self.folder.with_name("kernels.pypto-bench-saved")

    def __enter__(self) -> "SimplerCache":
        if self.saved.exists():
            raise BenchError(f"{self.saved} exists (an earlier run was stopped): move it back to {self.folder} "
                             "(after removing the one there) and run again")
        if self.folder.exists():
            self.folder.rename(self.saved)
        return self

    def clear(self) -> None:
        if self.folder.exists():
            shutil.rmtree(self.folder)

    def __exit__(self, *exc: object) -> None:
        if self.saved.exists():
            self.clear()
            self.saved.rename(self.folder)


def scene_test(runner: Runner, simpler: Path, example: str, case: str) -> tuple[tuple[float, float], str]:
    """simpler's own scene test of `example` on a2a3sim, its one `case` (the directory's; a case marked manual on
    the simulator, as vector_example's, runs too), one pytest process: ((wall, load), verdict)."""
    env = {k: v for k, v in runner.env.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-m", "pytest", "-q", f"examples/a2a3/tensormap_and_ringbuffer/{example}",
           "--platform", PLATFORM, "--case", case, "--manual", "include", "-p", "no:cacheprovider"]
    saved, runner.env = runner.env, env
    try:
        dt, p = runner.run(cmd, cwd=simpler, check=False)
    finally:
        runner.env = saved
    tail = (p.stdout.strip().splitlines() or ["?"])[-1]
    if p.returncode not in (0, 1) or not re.search(r"\d+ (passed|failed)", tail):
        raise BenchError(f"simpler's scene test of {example}: exit {p.returncode}: {tail}")
    return (dt, p.other_load), ("PASSED" if p.returncode == 0 else "FAILED (golden mismatch)"
                                if "Golden mismatch" in p.stdout else f"FAILED ({tail})")


def units(root: Path) -> dict[str, object]:
    """The graph's compile units by source (relative path): each has `argv`, `cwd` and `output`."""
    from pypto_build.plan.graph import load_graph

    graph = load_graph(root, PLATFORM)
    return {u.source: u for plan in graph.plans for u in plan.units}


def binaries(root: Path) -> dict[str, str]:
    """bare_run.py's BINARIES_JSON: the orchestration's and each kernel's binary (func_id from its file name)."""
    found = {}
    for source, unit in units(root).items():
        path = str(root / unit.output)
        if source.startswith("orchestration/"):
            found["orchestration"] = path
        else:
            found[re.match(r"cache/incore_(\d+)_", unit.output).group(1)] = path
    return found


class HandCompile:
    """One kernel's compile by the graph's exact argv, run in a scratch copy (the directory's paths in the argv
    point into `scratch`), so the directory and its state never see it."""

    def __init__(self, root: Path, kernel: str, scratch: Path):
        unit = units(root)[kernel]
        self.root, self.kernel, self.scratch = root, kernel, scratch
        self.cwd = unit.cwd or str(root)
        self.argv = [a.replace(str(root), str(scratch)) for a in unit.argv]
        self.shown = " ".join(unit.argv)
        (scratch / kernel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / unit.output).parent.mkdir(parents=True, exist_ok=True)

    def run(self, runner: Runner) -> tuple[float, float]:
        shutil.copyfile(self.root / self.kernel, self.scratch / self.kernel)
        dt, p = runner.run(self.argv, cwd=Path(self.cwd))
        return dt, p.other_load


def bare_run(runner: Runner, root: Path) -> tuple[tuple[float, float], float | None]:
    """bare_run.py on the directory's binaries: ((init..close seconds, load), chip.run seconds)."""
    _, p = runner.run([sys.executable, str(BARE), str(root), json.dumps(binaries(root))])
    result = json.loads(p.stdout.split("BARE_RUN ", 1)[1].splitlines()[0])
    return (result["seconds"], p.other_load), chip_run(p.stdout + p.stderr)


def sizes(runner: Runner, root: Path) -> dict:
    _, p = runner.run([sys.executable, str(BARE), str(root), "--sizes"])
    return json.loads(p.stdout.split("BARE_RUN ", 1)[1].splitlines()[0])


def du(path: Path) -> int:
    """Disk usage in bytes (`du -s`), 0 when absent."""
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def state_sizes(root: Path) -> dict[str, int]:
    """`.pypto_build` and its parts: golden/, replay/, state/, and the rest."""
    base = root / ".pypto_build"
    parts = {name: du(base / name) for name in ("golden", "replay", "state")}
    total = du(base)
    return {"total": total, **parts, "rest": total - sum(parts.values())}


class Watch:
    """A `pypto-build watch --validate --runs 1 DIR` process; stdout and stderr lines timestamped as read."""

    def __init__(self, root: Path, env: dict):
        self.proc = subprocess.Popen([sys.executable, "-m", "pypto_build", "watch", "--validate", "--runs", "1",
                                      str(root)], cwd=root.parent, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.lines: queue.Queue = queue.Queue()
        self.timing: list[tuple[float, float]] = []         # (when read, chip.run seconds)
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr,), daemon=True).start()

    def _pump(self, stream) -> None:
        for line in stream:
            at, dur = time.perf_counter(), chip_run(line)
            if dur is not None:
                self.timing.append((at, dur))
            elif not line.startswith("[mono_ns="):
                self.lines.put((at, line.rstrip("\n")))

    def until(self, pattern: str) -> tuple[float, str]:
        return line_matching(self.lines, self.proc, pattern, WAIT_S)

    def chip_run_after(self, start: float) -> float | None:
        return next((dur for at, dur in self.timing if at >= start), None)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def machine(simpler: Path, started_load: tuple[float, ...]) -> list[tuple[str, str]]:
    def first(cmd: list[str], cwd: Path | None = None) -> str:
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        return (out.stdout.strip().splitlines() or ["?"])[0]

    import torch

    dirty = first(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
    return [("date", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), ("cores", str(os.cpu_count())),
            ("CPU", cpu_model()), ("kernel", _platform.release()), ("Python", _platform.python_version()),
            ("torch", torch.__version__), ("g++-15 on PATH (simpler's kernel compiler)", first(["g++-15", "--version"])),
            ("simpler", first(["git", "rev-parse", "--short", "HEAD"], simpler)),
            ("pypto_build", first(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
             + (" (with uncommitted changes)" if dirty != "?" else "")),
            ("load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in started_load))]
