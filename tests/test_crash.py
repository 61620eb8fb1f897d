"""Crash harness: kill runs at random points (SIGKILL, SIGTERM; the whole group or only the leader).

Each trial copies a pristine directory, starts the real CLI, kills it after a
random delay drawn from the scenario's own uninterrupted duration, then checks:
no torn file (every file is either its old or its final content; temp files
aside), a readable state database, no lock left held; a normal run completes,
runs exactly the units the state had not recorded as finished, leaves no temp
file, and every file ends byte-identical to an uninterrupted run.

`PYPTO_BUILD_CRASH_TRIALS` sets the trials per scenario (default 11: 55 in all).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS, HOST_STATE_DB, age_tree, copy_dir, edit
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.platforms.host.places import HOST_OUTPUTS

pytestmark = pytest.mark.slow

TRIALS = int(os.environ.get("PYPTO_BUILD_CRASH_TRIALS", "6"))
ATTEMPTS = 20       # runs per trial until one is killed while running (see trial())
KILLS = [(signal.SIGKILL, "group"), (signal.SIGKILL, "leader"), (signal.SIGTERM, "leader"),
         (signal.SIGTERM, "group")]
STATE = ".pypto_build"
RESULTS: dict[str, dict] = {}       # per scenario: trials, kills by mode, phases hit (printed at the end)


@dataclass
class Scenario:
    name: str
    argv: list[str]                         # pypto-build arguments before DIR
    pristine: Path
    build_kwargs: dict = field(default_factory=dict)
    cache: bool = False                     # argv gets --cache-dir (one fresh cache per trial)
    validate: bool = False                  # after recovery, `pypto-build validate` must pass
    seconds: float = 0.0                    # an uninterrupted run, measured (only to place kill points)
    final: dict[str, str] = field(default_factory=dict)    # rel path -> digest after an uninterrupted run
    units: set[str] = field(default_factory=set)           # the units an uninterrupted run runs
    pristine_files: dict[str, str] = field(default_factory=dict)


def snapshot(root: Path) -> dict[str, str]:
    """rel path -> sha256 of every file outside the state folder, and of the host binaries and stamp in it."""
    out = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and (not rel.startswith(STATE + "/") or rel.startswith(HOST_OUTPUTS + "/")):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def is_temp(rel: str) -> bool:
    return Path(rel).name.startswith(".") and ".tmp" in Path(rel).name


def recorded(root: Path) -> dict[str, str]:
    """task -> state row of every task the database records as finished; asserts it is intact."""
    db = root / HOST_STATE_DB
    if not db.exists():
        return {}
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"{db}: damaged"
        if not conn.execute("select 1 from sqlite_master where name = 'doit'").fetchone():
            return {}                       # killed between creating the file and its table
        rows = conn.execute("select task_id, task_data from doit").fetchall()
    finally:
        conn.close()
    return {task: data for task, data in rows if "checker:" in json.loads(data)}


def finished_since(root: Path, before: dict[str, str]) -> set[str]:
    """Tasks whose state row was written after `before` was taken."""
    return {task for task, data in recorded(root).items() if before.get(task) != data}


def lock_is_free(root: Path, within: float = 10.0) -> bool:
    """The directory lock can be taken (orphans die with their parent, so allow a moment)."""
    path = root / STATE / "lock"
    if not path.exists():
        return True
    deadline = time.monotonic() + within
    fd = os.open(path, os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
    finally:
        os.close(fd)


def run_argv(scn: Scenario, root: Path, cache: Path | None) -> list[str]:
    extra = ["--cache-dir", str(cache)] if scn.cache else []
    return ["pypto-build", *scn.argv, *extra, str(root)]


def prepare(scn: Scenario, tmp: Path) -> None:
    """Measure one uninterrupted run: its duration places the kill points, its files are the truth."""
    root = copy_dir(scn.pristine, tmp / "reference")
    start = time.monotonic()
    subprocess.run(run_argv(scn, root, tmp / "reference_cache"), check=True, stdout=subprocess.DEVNULL, timeout=300)
    scn.seconds = time.monotonic() - start
    scn.final = snapshot(root)
    scn.pristine_files = snapshot(scn.pristine)
    assert build(root, **scn.build_kwargs).compiled == []
    result = build(copy_dir(scn.pristine, tmp / "units"), **scn.build_kwargs)
    scn.units = set(result.compiled) | set(result.from_cache)
    assert scn.units


def kill_once(scn: Scenario, root: Path, cache: Path, rng: random.Random, sig: int, who: str) -> tuple[bool, str]:
    """Start the run and kill it at a random point; (killed while running, stderr).

    Half the kill points are a random delay into the run; the others wait until a random number of
    its outputs have landed, then a few milliseconds more (start-up would otherwise dominate).
    """
    outputs = [root / rel for rel, d in scn.final.items() if scn.pristine_files.get(rel) != d]
    wanted = rng.randint(1, len(outputs)) if outputs and rng.random() < 0.5 else 0
    delay = rng.uniform(0.0, 0.05) if wanted else rng.uniform(0.02, 0.9) * scn.seconds
    before = {p: inode(p) for p in outputs}             # outputs are replaced, never rewritten in place
    err = root.parent / "stderr.txt"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(run_argv(scn, root, cache), stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
        while wanted and proc.poll() is None and sum(inode(p) != before[p] for p in outputs) < wanted:
            time.sleep(0.005)
        try:
            proc.wait(delay)
            return False, err.read_text()
        except subprocess.TimeoutExpired:
            pass
        if who == "group":
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)
        finish(proc)
    wait_gone(proc.pid, root)
    return True, err.read_text()


def finish(proc: subprocess.Popen, within: float = 60.0) -> tuple[str, str]:
    """The run's output once it exits; a run still going after `within` s is a hang: kill it, fail."""
    try:
        return proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the run (pid {proc.pid}) hung: still running {within} s after the signal")


def inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def wait_gone(pgid: int, root: Path, within: float = 30.0) -> None:
    """Wait (bounded) for the killed run's group and for the compilers it started: each runs in a
    session of its own, so a SIGKILLed leader cannot stop them; they finish into temp files."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            if not working_in(root):
                return
        time.sleep(0.05)
    for pid in working_in(root):
        os.kill(pid, signal.SIGKILL)
    os.killpg(pgid, signal.SIGKILL)
    pytest.fail(f"processes of the killed run (group {pgid}) still alive after {within} s")


def working_in(root: Path) -> list[int]:
    """Processes whose working directory is inside `root` (a compiler runs in its unit's folder)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = Path(os.readlink(f"/proc/{name}/cwd"))
        except OSError:
            continue
        if cwd == root or root in cwd.parents:
            found.append(int(name))
    return found


def phase(scn: Scenario, files: dict[str, str], pristine: dict[str, str]) -> str:
    """Where the kill landed, from the files it left (for the figures)."""
    outputs = {r for r, d in scn.final.items() if pristine.get(r) != d and not r.endswith("binary_context.json")}
    done = {r for r in outputs if files.get(r) == scn.final[r]}
    stamps = [r for r in scn.final if r.endswith("binary_context.json")]
    if not done:
        removed = any(r in pristine and r not in files for r in stamps)
        return "stamp removed, first output not landed" if removed else "before any output"
    if done < outputs:
        return "between outputs"
    stamped = all(files.get(r) == scn.final[r] for r in stamps)
    return "after the stamp" if stamped else "before the stamp"


def trial(scn: Scenario, base: Path, index: int, rng: random.Random) -> str:
    sig, who = KILLS[index % len(KILLS)]
    pristine, pristine_rows = scn.pristine_files, recorded(scn.pristine)
    cache = base / f"t{index}_cache"
    kwargs = {**scn.build_kwargs, "cache_dir": cache} if scn.cache else scn.build_kwargs
    # A kill point after the last output lands hits only the run's last few ms (the no-op record, the
    # exit): most such attempts find the run finished, so allow enough of them (a one-edit build's
    # tail is ~5 ms since it leaves without the interpreter's teardown).
    for attempt in range(ATTEMPTS):
        work = base / f"t{index}_{attempt}"
        work.mkdir()
        shutil.rmtree(cache, ignore_errors=True)        # a run that finished filled it
        root = copy_dir(scn.pristine, work / "d")
        killed, stderr = kill_once(scn, root, cache, rng, sig, who)
        if killed:
            break
    else:
        pytest.fail(f"{scn.name}: the run always finished before the kill point")
    where = f"{scn.name} trial {index} ({signal.Signals(sig).name} to {who})"
    if sig == signal.SIGTERM:
        assert "Traceback" not in stderr, f"{where}: SIGTERM must stop cleanly:\n{stderr}"

    # right after the kill: nothing torn, state readable, lock free
    after = snapshot(root)
    for rel, digest in after.items():
        if not is_temp(rel):
            assert digest in (pristine.get(rel), scn.final.get(rel)), f"{where}: torn or foreign file {rel}"
    finished = finished_since(root, pristine_rows)
    assert lock_is_free(root), f"{where}: the lock is still held after the run died"
    binaries = {Path(rel).stem for rel, d in after.items() if rel.endswith(".so") and pristine.get(rel) != d}
    landed = {t for t in scn.units if t.rsplit("/", 1)[-1].split(":")[-1] in binaries}
    assert len(landed - finished) <= 4, f"{where}: finished units not recorded: {sorted(landed - finished)}"

    # a normal run completes and runs exactly the unfinished units
    result = build(root, **kwargs)
    ran = set(result.compiled) | set(result.from_cache)
    unfinished = scn.units - finished
    assert ran == unfinished, f"{where}: ran {sorted(ran)}, unfinished {sorted(unfinished)}"
    final = snapshot(root)
    assert final == scn.final, f"{where}: outputs differ: {sorted(set(final.items()) ^ set(scn.final.items()))}"
    assert build(root, **kwargs).compiled == []
    if scn.cache:
        check_cache_after_kill(scn, base / f"t{index}_fresh", cache)
    if scn.validate:
        out = subprocess.run(["pypto-build", "validate", str(root)], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "PASSED" in out.stdout, f"{where}: {out.stdout}{out.stderr}"
    return phase(scn, after, pristine)


def check_cache_after_kill(scn: Scenario, work: Path, cache: Path) -> None:
    """A fresh copy built from the cache a killed run stored into gets correct binaries."""
    from pypto_build.cache.store import ArtifactCache
    fresh = copy_dir(scn.pristine, work)
    result = build(fresh, cache_dir=cache, **scn.build_kwargs)
    assert result.from_cache, "the recovered run stored its binaries"
    assert snapshot(fresh) == scn.final
    assert ArtifactCache(cache).stats().corrupt == 0, "no entry was torn"


# ---------------------------------------------------------------------------
# scenarios
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("crash-pristine")
    plain = synth.write_l2(base / "plain", kernels=8, golden=True)
    one_edit = synth.write_l2(base / "one_edit", kernels=8, golden=True)
    build(one_edit)
    age_tree(one_edit)
    edit(next((one_edit / "kernels" / "aiv").glob("*.cpp")), '\nextern "C" int edited() { return 7; }\n')
    pto = synth.write_l2(base / "pto", kernels=4, pto=True)
    build(pto, ptoas=str(FAKE_PTOAS))
    age_tree(pto)
    for p in sorted((pto / "ptoas").glob("*.pto")):
        edit(p, f"// CPP: // edited {p.stem}\n")
    return {"plain": plain, "one_edit": one_edit, "pto": pto}


def scenarios(pristine: dict[str, Path]) -> dict[str, Scenario]:
    j2 = ["build", "-q", "-j", "2"]
    return {
        "compile": Scenario("compile", j2, pristine["plain"], {"jobs": 2}),
        "splice": Scenario("splice", [*j2, "--ptoas", str(FAKE_PTOAS)], pristine["pto"],
                           {"jobs": 2, "ptoas": str(FAKE_PTOAS)}),
        "stamp": Scenario("stamp", ["build", "-q"], pristine["one_edit"]),
        "cache-store": Scenario("cache-store", j2, pristine["plain"], {"jobs": 2}, cache=True),
        "replay": Scenario("replay", ["replay", "--validate"], pristine["plain"], validate=True),
    }


@pytest.mark.parametrize("name", ["compile", "splice", "stamp", "cache-store", "replay"])
def test_killed_runs_recover_exactly(name, pristine, tmp_path):
    scn = scenarios(pristine)[name]
    prepare(scn, tmp_path)
    rng = random.Random(f"{name}-{TRIALS}")
    phases = [trial(scn, tmp_path, i, rng) for i in range(TRIALS)]
    RESULTS[name] = {"trials": TRIALS, "phases": {p: phases.count(p) for p in sorted(set(phases))}}
    print(f"\ncrash {name}: {TRIALS} trials survived, kill points {RESULTS[name]['phases']}")


@pytest.mark.parametrize("argv", [["pypto-build", "build", "-j", "2", "."], ["doit", "pypto-build", "-j", "2"]])
def test_sigint_stops_cleanly_and_keeps_finished_work(argv, tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=24)
    proc = subprocess.Popen(argv, cwd=root, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(root.rglob("*.so"))) < 4:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)           # what Ctrl-C sends: the whole foreground group
    out, err = finish(proc)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted; finished units are kept" in err
    finished = set(recorded(root))
    assert len(finished) >= 3
    result = build(root)
    assert result.compiled and not set(result.compiled) & finished
    assert len(result.compiled) + len(finished) == 25
    assert not [p for p in root.rglob("*") if ".tmp" in p.name]


def worker_pids(leader: int) -> list[int]:
    """The leader's `-j` workers: its child processes running Python (not the compilers)."""
    children = Path(f"/proc/{leader}/task/{leader}/children").read_text().split()
    return [int(c) for c in children if "python" in Path(f"/proc/{c}/exe").resolve().name]


def test_a_worker_dying_on_its_own_stops_the_run_in_one_line(tmp_path):
    """What the OOM killer does: doit alone would wait for the dead worker's result forever."""
    root = synth.write_l2(tmp_path / "d", kernels=24)
    proc = subprocess.Popen(["pypto-build", "build", "-j", "2", str(root)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(list(root.rglob("*.so"))) < 3 or not worker_pids(proc.pid)):
        time.sleep(0.02)
    victim = worker_pids(proc.pid)[0]
    os.kill(victim, signal.SIGKILL)
    out, err = finish(proc)                                  # no hang
    assert proc.returncode == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and f"build worker process {victim} died (killed by SIGKILL" in lines[0], err
    assert "finished units are kept" in lines[0] and "Traceback" not in out + err
    wait_gone(proc.pid, root)
    assert lock_is_free(root)
    finished = set(recorded(root))
    result = build(root)
    assert result.ok and not set(result.compiled) & finished
    assert len(result.compiled) + len(finished) == 25
