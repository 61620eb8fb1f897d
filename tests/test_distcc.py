"""Distributed compiles (issue 15): a real distccd on 127.0.0.1, real distcc, real g++, real builds.

distcc sends compile-only jobs; our kernels compile and link in one command, so through a
launcher each kernel is compiled (`-c`, through distcc) and linked here. What must hold:
the jobs ran on distccd (its own log says so), the binaries are byte-identical to a local
build's, the launcher is no unit's input (switching it rebuilds nothing), headers are still
tracked, a dead host is distcc's own fallback plus one line from us with nothing wrong
recorded, and local work never runs more than the local slots allow.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import copy_dir, edit, inject
from pypto_build.toolchain import launcher, local_slots
from pypto_build.errors import ToolchainError
from pypto_build.testing import synth
from pypto_build.testing.loopback import distccd, distccd_path, free_port

# CI (.ci/run) installs distcc and sets PYPTO_BUILD_REQUIRE_DISTCC=1: there these tests fail instead of skipping.
REQUIRED = os.environ.get("PYPTO_BUILD_REQUIRE_DISTCC") == "1"
needs_distcc = pytest.mark.skipif(distccd_path() is None and not REQUIRED,
                                  reason="distcc not installed (apt-get install distcc)")
KERNELS = 4
FALLBACK = "pypto-build: warning: distcc compiled here"


def pypto_build(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def binaries(root: Path) -> dict[str, bytes]:
    found = {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / ".pypto_build" / "host").rglob("*.so")}
    assert len(found) == KERNELS + 1
    return found


def kernel_sources(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "kernels").rglob("*.cpp"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if distccd_path() is None:
        pytest.fail("distcc is required here (PYPTO_BUILD_REQUIRE_DISTCC=1, as in CI) but not installed: "
                    "apt-get install distcc")
    with distccd(tmp_path_factory.mktemp("distccd")) as running:
        yield running


@pytest.fixture(scope="module")
def local_build(tmp_path_factory) -> Path:
    """The fixture built locally (no launcher): the bytes a distributed build must reproduce."""
    root = synth.write_l2(tmp_path_factory.mktemp("local") / "d", kernels=KERNELS)
    done = pypto_build("build", "-q", str(root))
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture
def distributed(server, tmp_path) -> tuple[Path, dict[str, str]]:
    """A fresh copy of the fixture (same files, another place) and the environment that sends its compiles
    to the test's distccd."""
    return synth.write_l2(tmp_path / "d", kernels=KERNELS), {"CXX": "distcc g++", **server.env()}


@needs_distcc
def test_kernels_compile_on_distccd_and_equal_a_local_build_byte_for_byte(server, local_build, distributed, tmp_path):
    root, env = distributed
    before = len(server.compiled())
    done = pypto_build("build", "-j", "8", str(root), env={**env, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert f"{KERNELS} of {KERNELS + 1} compiles go through distcc; 1 more (debug info, " in done.stdout
    assert f"{KERNELS + 1} compiled" in done.stdout
    assert FALLBACK not in done.stderr
    # distccd's own log: every kernel was compiled there; the orchestration (built with -g) was not
    remote = [Path(s).name for s in server.compiled()[before:]]
    assert sorted(remote) == kernel_sources(root)
    assert binaries(root) == binaries(local_build)
    # -j 8 on this machine's CPUs: the local work (the links) went through the local slots
    slots = tmp_path / f"pypto-build-{os.getuid()}" / "local-slots"
    assert sorted(p.name for p in slots.iterdir()) == [str(i) for i in range(launcher.local_jobs())]


@needs_distcc
def test_switching_the_launcher_rebuilds_nothing(server, local_build, tmp_path):
    root = copy_dir(local_build, tmp_path / "d")
    for env in ({"CXX": "distcc g++", **server.env()}, {"PYPTO_BUILD_LAUNCHER": "distcc", **server.env()}, {}):
        done = pypto_build("build", str(root), env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.rstrip().endswith(f"0 compiled, {KERNELS + 1} up to date"), done.stdout
    done = pypto_build("build", "--launcher", "distcc", "--recompile", str(root), env=server.env())
    assert done.returncode == 0, done.stderr
    assert binaries(root) == binaries(local_build)


@needs_distcc
def test_a_header_edit_recompiles_exactly_its_kernels_through_distcc(server, distributed):
    root, env = distributed
    assert pypto_build("build", "-j", "4", str(root), env=env).returncode == 0
    users = sorted(p.name for p in (root / "kernels").rglob("*.cpp") if "common.h" in p.read_text())
    assert 0 < len(users) < KERNELS
    before = len(server.compiled())
    edit(root / "kernels" / "common.h")
    done = pypto_build("build", "-j", "4", str(root), env=env)
    assert done.returncode == 0, done.stderr
    assert f"{len(users)} compiled, {KERNELS + 1 - len(users)} up to date" in done.stdout
    assert sorted(Path(s).name for s in server.compiled()[before:]) == users


@needs_distcc
def test_a_dead_host_is_distccs_local_fallback_and_one_line(server, local_build, distributed):
    root, env = distributed
    dead = {**env, "DISTCC_HOSTS": f"127.0.0.1:{free_port()}"}       # nobody listens there
    before = len(server.compiled())
    done = pypto_build("build", "-j", "4", str(root), env=dead)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(FALLBACK) == 1, done.stderr
    assert server.compiled()[before:] == []
    assert binaries(root) == binaries(local_build)
    # nothing wrong was recorded: with the host back, and without distcc, everything is up to date
    for again in (env, {}):
        done = pypto_build("build", str(root), env=again)
        assert done.stdout.rstrip().endswith("0 compiled, 5 up to date"), done.stdout


@needs_distcc
def test_a_compile_error_through_distcc_fails_its_unit_and_keeps_the_binary(server, local_build, tmp_path):
    root = copy_dir(local_build, tmp_path / "d")
    kernel = sorted((root / "kernels").rglob("*.cpp"))[0]
    installed = {k: v for k, v in binaries(root).items() if kernel.stem in k}
    inject(kernel, "this is not C++;")
    done = pypto_build("build", "-j", "4", str(root), env={"CXX": "distcc g++", **server.env()})
    assert done.returncode != 0
    assert f"{kernel.relative_to(root)}: compiling failed: " in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert {k: v for k, v in binaries(root).items() if kernel.stem in k} == installed


def test_a_launcher_that_is_not_there_is_one_line(local_build, tmp_path):
    root = copy_dir(local_build, tmp_path / "d")
    for args, env in ((["--launcher", "no-such-distcc"], {}), ([], {"PYPTO_BUILD_LAUNCHER": "no-such-distcc"})):
        done = pypto_build("build", *args, str(root), env=env)
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "compile launcher 'no-such-distcc' not found on PATH" in lines[0], done.stderr


def test_split_keeps_a_command_whole_unless_it_is_one_source_linked_without_debug_info():
    argv = ["/usr/bin/g++", "-shared", "-fPIC", "-O2", "-Wl,--build-id=sha1", "-Iinc", "-o", "k.so", "k.cpp"]
    compile_argv, link = launcher.split(argv)
    assert compile_argv == ["/usr/bin/g++", "-fPIC", "-O2", "-Iinc", "-o", "k.so", "-c", "k.cpp"]
    assert link == argv
    assert launcher.split([*argv[:-1], "-g", "k.cpp"]) is None               # debug info: columns would move
    assert launcher.split([*argv[:-1], "-g", "-g0", "k.cpp"]) is not None    # the last -g counts
    assert launcher.split([*argv, "helper.cpp"]) is None                     # two sources
    assert launcher.split(["g++", "-c", "-o", "k.o", "k.cpp"]) is None       # compile-only already
    assert launcher.split(["g++", "-fPIC", "-o", "k", "k.cpp"]) is None      # not a shared object


def test_peel_takes_known_launchers_off_cxx():
    assert launcher.peel(["distcc", "g++", "-m64"]) == (["distcc"], ["g++", "-m64"])
    assert launcher.peel(["/usr/bin/ccache", "distcc", "g++"]) == (["/usr/bin/ccache", "distcc"], ["g++"])
    assert launcher.peel(["g++"]) == ([], ["g++"])
    assert launcher.peel(["distcc"]) == ([], ["distcc"])                    # distcc alone: the compiler
    with pytest.raises(ToolchainError, match="not found on PATH"):
        launcher.find("no-such-launcher", {"PATH": "/nonexistent"})


def _hold(limit: int, log: str, barrier) -> None:
    local_slots.configure(limit)
    barrier.wait()
    for _ in range(3):
        with local_slots.slot():
            with open(log, "a") as f:
                f.write("+\n")
            time.sleep(0.01)
            with open(log, "a") as f:
                f.write("-\n")


@pytest.mark.parametrize("limit", [1, 2])
def test_local_slots_never_hold_more_than_the_limit_across_processes(limit, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))           # a slot folder of this test's own
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_hold, args=(limit, str(log), barrier)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    held = peak = 0
    for mark in log.read_text().split():
        held += 1 if mark == "+" else -1
        peak = max(peak, held)
    assert held == 0 and peak <= limit and log.read_text().count("+") == 12


@needs_distcc
def test_ci_sends_every_directorys_compiles_to_distcc(server, local_build, tmp_path):
    """`ci -j 4 --launcher distcc`: two directories' kernels compile on distccd; their local work shares the
    local slots of this machine (ci's -j is above its CPUs)."""
    dirs = [synth.write_l2(tmp_path / name, kernels=KERNELS) for name in ("a", "b")]
    before = len(server.compiled())
    done = subprocess.run(["pypto-build", "ci", "-q", "-j", "4", "--launcher", "distcc", *map(str, dirs)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **server.env(), "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(Path(s).name for s in server.compiled()[before:]) == sorted(kernel_sources(dirs[0]) * 2)
    for d in dirs:
        assert binaries(d) == binaries(local_build)
    assert (tmp_path / f"pypto-build-{os.getuid()}" / "local-slots" / "0").exists()


def test_a_fallback_is_said_once_per_run_in_the_launchers_own_words(capsys, monkeypatch):
    """distcc's and icecream's words for compiling here (icecream's as seen by hand: docs/ci.md)."""
    from pypto_build.core.shared_flag import SharedFlag

    icecc = launcher.Launcher(("/usr/bin/icecc",), SharedFlag())
    said = "ICECC[30122] 2026-12-02 12:55:58: got exception Error 2 - no server found at 127.0.0.1 (127.0.0.1)"
    icecc.note_fallback("some warning: unused variable\n")
    assert capsys.readouterr().err == ""
    for _ in range(3):
        icecc.note_fallback(f"x.cpp:1: warning: w\n{said}\n")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"pypto-build: warning: icecc compiled here, not on a remote host ({said}); check its hosts "
                     "— the build goes on"]
    ccache = launcher.Launcher(("ccache",), SharedFlag())
    ccache.note_fallback("running locally instead")           # ccache never sends anything anywhere
    assert capsys.readouterr().err == ""
    # icecream's caret workaround would compile every kernel that warns twice: off, unless the user set it
    monkeypatch.delenv("ICECC_CARET_WORKAROUND", raising=False)
    assert icecc.env()["ICECC_CARET_WORKAROUND"] == "0"
    monkeypatch.setenv("ICECC_CARET_WORKAROUND", "1")
    assert icecc.env() is None
    assert launcher.Launcher(("distcc",), SharedFlag()).env() is None
