"""Programs we start are bounded (time, output, lifetime), and file names reach them only as paths.

Real processes, real g++, real doit. The stand-ins are labelled test executables:
`tools/hang_cxx` and `tools/flood_cxx` (a C++ compiler's command line, no compiler),
`pypto_build/testing/fake_ptoas.py` (ptoas's command line).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pypto_build.core import procs
from pypto_build.testing import fake_ptoas, synth
from pypto_build.api import build
from pypto_build.errors import BuildError
from pypto_build.platforms.host.places import host_binary
from test_synth import call_kernel

TOOLS = Path(__file__).parent / "tools"
HANG_CXX = TOOLS / "hang_cxx"
FLOOD_CXX = TOOLS / "flood_cxx"
FAKE_PTOAS = Path(fake_ptoas.__file__).resolve()
K0 = "kernels/aic/main_incore_0_aic.cpp"
ORCH = "orchestration/main.cpp"


# --- helpers ---------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """A process that still runs (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def wait_for(predicate, what: str, limit: float = 60.0) -> None:
    """Poll `predicate` until it holds; fail after `limit` seconds (a bound, not a measurement)."""
    end = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)


def assert_gone(pids: list[int]) -> None:
    """Every pid in `pids` has stopped running (a SIGKILLed process may take a moment to be torn down)."""
    assert pids
    try:
        wait_for(lambda: not any(alive(p) for p in pids), "the killed processes to go", limit=10)
    except AssertionError:
        raise AssertionError(f"still running: {[p for p in pids if alive(p)]}") from None


def recorded_pids(folder: Path) -> list[int]:
    """The pids hang_cxx wrote (one complete file per compile: "<own pid> <helper pid>")."""
    return [int(w) for f in sorted(folder.iterdir()) if not f.name.startswith(".") for w in f.read_text().split()]


@pytest.fixture
def reaper():
    """Pids a test started indirectly; whatever still runs at the end is SIGKILLed (a failing test
    must not leave `sleep 3600` behind)."""
    sources: list = []
    yield sources
    for source in sources:
        for pid in source():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def hang_cxx(tmp_path, monkeypatch, reaper) -> Path:
    """CXX = the hanging stand-in; returns the folder where it records its pids."""
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("CXX", str(HANG_CXX))
    monkeypatch.setenv("HANG_CXX_PIDS", str(pids))
    reaper.append(lambda: recorded_pids(pids))
    return pids


def cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True,
                          timeout=300, **kwargs)


def move_source(root: Path, rel: str, new_rel: str) -> None:
    """Move a source and point its kernel_config.py entry at the new name."""
    (root / new_rel).parent.mkdir(parents=True, exist_ok=True)
    os.replace(root / rel, root / new_rel)
    old = " / ".join(json.dumps(p) for p in Path(rel).parts)
    new = " / ".join(json.dumps(p) for p in Path(new_rel).parts)
    config = root / "kernel_config.py"
    text = config.read_text()
    assert f"_ROOT_DIR / {old})" in text
    config.write_text(text.replace(f"_ROOT_DIR / {old})", f"_ROOT_DIR / {new})"))


def options_payload(root: Path, name: str, marker: Path) -> None:
    """`name` holds compiler options that create `marker` if g++ or cc1plus ever reads it as a response
    file (its first word is a source, or what an option taking a value swallows)."""
    (root / "decoy.cpp").write_text('extern "C" int decoy() { return 7; }\n')
    (root / name).write_text(f"decoy.cpp -fdump-tree-original={marker}\n")


# --- procs.run and procs.path_arg ------------------------------------------------------------------


def test_path_arg_makes_every_path_unmistakable():
    assert procs.path_arg("k.cpp") == "./k.cpp"
    assert procs.path_arg("-main.cpp") == "./-main.cpp"
    assert procs.path_arg("@k0.cpp") == "./@k0.cpp"
    assert procs.path_arg("kernels/aic/k.cpp") == "./kernels/aic/k.cpp"
    assert procs.path_arg("../inc") == "../inc"
    assert procs.path_arg("./k.cpp") == "./k.cpp"
    assert procs.path_arg("/abs/-x.cpp") == "/abs/-x.cpp"
    assert procs.path_arg(Path("a b.cpp")) == "./a b.cpp"


def test_which_finds_what_shutil_which_finds(tmp_path, monkeypatch):
    """core.which (a run's start does without shutil) answers as shutil.which on every kind of entry."""
    from pypto_build.core.which import which
    bin_a, bin_b = tmp_path / "a", tmp_path / "b"
    bin_a.mkdir()
    bin_b.mkdir()
    (bin_a / "tool").write_text("#!/bin/sh\n")              # not executable: skipped
    (bin_a / "dir-tool").mkdir()                            # a directory: skipped
    for target in (bin_b / "tool", bin_b / "dir-tool"):
        target.write_text("#!/bin/sh\n")
        target.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    search = os.pathsep.join([str(bin_a), str(bin_b), str(bin_b)])
    for name, path in [("tool", search), ("dir-tool", search), ("tool", str(bin_a)), ("missing", search),
                       ("tool", ""), ("b/tool", None), ("a/tool", None), ("tool", os.pathsep + str(bin_b)),
                       ("g++", None), (str(bin_b / "tool"), None)]:
        assert which(name, path) == shutil.which(name, path=path), (name, path)
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh")


def test_run_keeps_the_head_and_tail_of_a_flood_and_counts_the_rest():
    size = 50 * 1024 * 1024
    code = ("import sys; out = sys.stderr.buffer; out.write(b'FIRST\\n');"
            f"[out.write(b'x' * 1048576) for _ in range({size // 1048576})]; out.write(b'\\nLAST\\n'); sys.exit(3)")
    result = procs.run([sys.executable, "-c", code], timeout=120)
    total = len(b"FIRST\n") + size + len(b"\nLAST\n")
    dropped = total - procs.HEAD_BYTES - procs.TAIL_BYTES
    assert result.returncode == 3 and not result.timed_out
    assert result.how == "exit status 3"
    assert result.stderr.startswith("FIRST\nxxx") and result.stderr.endswith("xxx\nLAST\n")
    assert f"\n[... {dropped} bytes omitted ...]\n" in result.stderr
    assert len(result.stderr) < procs.HEAD_BYTES + procs.TAIL_BYTES + 100
    assert result.stdout == ""


@pytest.mark.slow
def test_run_timeout_kills_the_whole_group(tmp_path, reaper):
    pids = tmp_path / "pids"
    pids.mkdir()
    reaper.append(lambda: recorded_pids(pids))
    result = procs.run([str(HANG_CXX), "-c", "k.cpp"], timeout=1, env={**os.environ, "HANG_CXX_PIDS": str(pids)})
    assert result.timed_out and result.returncode is None and result.how == "timed out"
    found = recorded_pids(pids)
    assert len(found) == 2                       # the stand-in and its helper (a grandchild of ours)
    assert_gone(found)


class Interrupted(BaseException):
    pass


def test_an_interrupt_while_waiting_kills_the_whole_group_and_is_raised(tmp_path, reaper):
    pidfile = tmp_path / "helper.pid"
    reaper.append(lambda: [int(pidfile.read_text())] if pidfile.exists() else [])
    script = f'sleep 3600 & echo $! > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; kill -USR1 $PPID; wait'

    def interrupt(signum, frame):
        raise Interrupted
    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with pytest.raises(Interrupted):
            procs.run(["/bin/sh", "-c", script], timeout=600)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert_gone([int(pidfile.read_text())])
    assert not procs._live


def test_kill_running_finds_a_program_whose_start_was_interrupted(reaper):
    """A `-j` worker leaving on a signal may have been inside Popen: the program runs, unregistered.
    kill_running() kills it by what run() gives every program (a session of its own), and only it."""
    unregistered = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    plain = subprocess.Popen(["sleep", "3600"])             # a child that is no program of run()'s
    reaper.append(lambda: [unregistered.pid, plain.pid])
    try:
        procs.kill_running()
        assert unregistered.wait(timeout=10) == -signal.SIGKILL
        assert plain.poll() is None
    finally:
        plain.kill()
        plain.wait()


def test_what_a_finished_program_left_running_is_killed(tmp_path, reaper):
    pidfile = tmp_path / "helper.pid"
    reaper.append(lambda: [int(pidfile.read_text())] if pidfile.exists() else [])
    # The helper keeps the output pipes open: waiting for them to close would wait for the timeout.
    result = procs.run(["/bin/sh", "-c", f"sleep 3600 & echo $! > {pidfile}; echo done"], timeout=60)
    assert (result.returncode, result.stdout, result.timed_out) == (0, "done\n", False)
    assert_gone([int(pidfile.read_text())])


# --- file names are paths ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kernel, orch", [("-k0.cpp", "-main.cpp"), ("--help.cpp", "--version.cpp"),
                                          ("k 0.cpp", "main orch.cpp")])
def test_sources_named_like_options_are_compiled_as_the_files_they_are(tmp_path, kernel, orch):
    root = synth.write_l2(tmp_path / "d", kernels=2, header_every=0)
    move_source(root, K0, kernel)                # at the sub-build's top: the argv starts with the name
    move_source(root, ORCH, orch)
    result = build(root)
    assert sorted(result.compiled) == sorted(["compile:aic/" + kernel[:-4], "compile:aiv/main_incore_1_aiv",
                                              "orch:" + orch[:-4]])
    so = tmp_path / "k0-copy.so"                 # dlopen caches by path
    shutil.copy(root / host_binary(kernel), so)
    assert call_kernel(so, [1.0, 2.0], [10.0, 20.0]) == [1.0, 2.0]       # kernel 0 copies a into out
    assert (root / host_binary(orch)).is_file()
    assert build(root).names("up-to-date", "compile:") == ["compile:aic/" + kernel[:-4],
                                                          "compile:aiv/main_incore_1_aiv"]


@pytest.mark.slow
def test_an_include_dir_named_like_a_response_file_stays_a_directory(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2, header_every=0)
    (root / "@inc").mkdir()
    marker = tmp_path / "MARKER"
    options_payload(root, "inc", marker)         # "-I@inc" made cc1plus read ./inc as options
    config = root / "kernel_config.py"
    config.write_text(config.read_text().replace('"core_type": "aic"',
                                                 '"core_type": "aic", "extra_include_dirs": [str(_ROOT_DIR / "@inc")]'))
    result = build(root)
    assert len(result.compiled) == 3
    assert not marker.exists()
    out = cli("compdb", str(root))
    assert out.returncode == 0, out.stderr
    argv = json.loads((root / "compile_commands.json").read_text())
    assert any("-I./@inc" in entry["arguments"] for entry in argv)


@pytest.mark.parametrize("rel, new_rel", [(K0, "@k0.cpp"), (K0, "kernels/aic/@k0.cpp"), (ORCH, "@k0.cpp")])
def test_a_source_named_like_a_response_file_is_refused_before_anything_runs(tmp_path, rel, new_rel):
    root = synth.write_l2(tmp_path / "d", kernels=2, header_every=0)
    move_source(root, rel, new_rel)
    marker = tmp_path / "MARKER"
    options_payload(root, "k0.cpp", marker)      # g++ (and cc1plus, given the base name) read "@k0.cpp" as k0.cpp
    out = cli("build", str(root))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pypto-build: error: {root / 'kernel_config.py'}:")
    assert "@k0.cpp" in lines[0] and "starts with '@'" in lines[0] and "Rename the file" in lines[0]
    assert not marker.exists()
    assert list(root.rglob("*.so")) == []


def pto_dir(tmp_path: Path, stem: str) -> Path:
    """An L2 dir whose ptoas unit of kernel 2 is called `stem`, built once (ptoas checks each unit once)."""
    root = synth.write_l2(tmp_path / "d", kernels=3, pto=True)
    for ext in (".pto", ".cpp"):
        os.replace(root / f"ptoas/main_incore_2_aic{ext}", root / f"ptoas/{stem}{ext}")
    build(root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("stem", ["@u", "-u"])
def test_ptoas_gets_unit_files_as_paths(tmp_path, ptoas_env, stem):
    root = pto_dir(tmp_path, stem)
    pto = root / f"ptoas/{stem}.pto"
    pto.write_text(pto.read_text().replace("synth_scale(a[i], 3.0f)", "synth_scale(a[i], 5.0f)"))
    result = build(root)
    runs = ptoas_env.read_text().splitlines()
    assert runs[-1] == f"./ptoas/{stem}.pto level2" and all(r.startswith("./ptoas/") for r in runs)
    assert result.compiled == ["compile:aic/main_incore_2_aic"]
    assert "5.0f" in (root / "kernels/aic/main_incore_2_aic.cpp").read_text()


# --- timeouts, signals, floods -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_compiler_that_times_out_is_killed_with_everything_it_started(tmp_path, hang_cxx, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    monkeypatch.setenv("PYPTO_COMPILER_TIMEOUT", "1")
    with pytest.raises(BuildError) as info:
        build(root)
    (failure,) = info.value.failures
    assert "compiler timed out after 1 s" in failure.headline
    assert "PYPTO_COMPILER_TIMEOUT" in failure.headline
    found = recorded_pids(hang_cxx)
    assert len(found) == 2
    assert_gone(found)


@pytest.mark.slow
def test_a_ptoas_that_times_out_is_killed_with_everything_it_started(tmp_path, ptoas_env, monkeypatch, reaper):
    root = pto_dir(tmp_path, "main_incore_2_aic")
    pidfile = tmp_path / "ptoas.pids"
    reaper.append(lambda: [int(w) for w in pidfile.read_text().split()] if pidfile.exists() else [])
    monkeypatch.setenv("FAKE_PTOAS_PIDFILE", str(pidfile))
    monkeypatch.setenv("PYPTO_PTOAS_TIMEOUT", "1")
    pto = root / "ptoas/main_incore_2_aic.pto"
    pto.write_text(pto.read_text() + "// FAKE_PTOAS_FORK_HANG\n")
    with pytest.raises(BuildError) as info:
        build(root)
    (failure,) = info.value.failures
    assert "ptoas rebuild failed for ptoas/main_incore_2_aic.pto: timed out after 1 s" in failure.headline
    found = [int(w) for w in pidfile.read_text().split()]
    assert len(found) == 2
    assert_gone(found)


def stop_while_it_hangs(argv: list[str], pids: Path, signum: int, to_group: bool = False) -> tuple[int, str]:
    """Start `pypto-build argv` in its own session (as a shell job: SIGINT to its group is a Ctrl-C at the
    terminal), send `signum` once the hanging compiler recorded its pids, and return (status, stderr)."""
    run = subprocess.Popen([sys.executable, "-m", "pypto_build", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_for(lambda: recorded_pids(pids) or run.poll() is not None, "the compiler to start")
        assert run.poll() is None
        (os.killpg if to_group else os.kill)(run.pid, signum)
        _out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert "Traceback" not in err.decode()
    return run.returncode, err.decode()


@pytest.mark.parametrize("signum, to_group, jobs", [(signal.SIGTERM, False, 1), (signal.SIGINT, True, 1),
                                                    (signal.SIGTERM, False, 2), (signal.SIGINT, True, 2)])
def test_stopping_the_tool_while_a_compiler_runs_leaves_no_process(tmp_path, hang_cxx, signum, to_group, jobs):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    status, _err = stop_while_it_hangs(["build", str(root), "-j", str(jobs)], hang_cxx, signum, to_group)
    assert status != 0
    assert_gone(recorded_pids(hang_cxx))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_tool_while_planning_asks_the_compiler_leaves_no_process(tmp_path, hang_cxx, monkeypatch,
                                                                              signum):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    monkeypatch.setenv("HANG_CXX_AT", "print")          # the driver's programs: asked while planning
    status, err = stop_while_it_hangs(["build", str(root)], hang_cxx, signum)
    assert status == 130, err
    assert_gone(recorded_pids(hang_cxx))
    assert not (root / ".pypto_build").exists()


def test_a_flooding_compiler_fails_in_one_line_with_its_output_capped(tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    monkeypatch.setenv("CXX", str(FLOOD_CXX))
    out = cli("build", str(root))
    assert out.returncode == 1
    failed = [line for line in out.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and failed[0].startswith("pypto-build: FAILED orch:main: ")
    assert "bytes omitted" in out.stdout and out.stdout.rstrip().endswith(
        "pypto-build: 0 compiled, 0 up to date, 1 failed")
    assert len(out.stdout) + len(out.stderr) < 2 * (procs.HEAD_BYTES + procs.TAIL_BYTES)
    with pytest.raises(BuildError) as info:
        build(root)
    message = info.value.failures[0].message
    assert len(message) < procs.HEAD_BYTES + procs.TAIL_BYTES + 2000
    assert "bytes omitted ...]" in message and message.rstrip().endswith("flood_cxx: the last line")
