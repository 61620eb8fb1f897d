"""pypto_build.pto.ptoas (lookup, level, argv, identity) and the labelled stand-in pypto_build/testing/fake_ptoas.py."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from pypto_build.core import hashing
from pypto_build.testing import fake_ptoas, synth
from pypto_build.errors import ToolchainError
from pypto_build.pto.ptoas import PtoasLookup, find_ptoas, infer_level, ptoas_argv, ptoas_identity
from pypto_build.pto.splice import find_target, function_names, preprocess, splice, split

FAKE = Path(fake_ptoas.__file__).resolve()


def make_exe(path: Path, text: str = "#!/bin/sh\nexit 0\n", mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


# ---------------------------------------------------------------------------
# find_ptoas
# ---------------------------------------------------------------------------


def test_explicit_path_wins(tmp_path):
    exe = make_exe(tmp_path / "my" / "ptoas-0.55")
    root = tmp_path / "root"
    make_exe(root / "ptoas")
    env = {"PTOAS_ROOT": str(root), "PATH": str(root)}
    assert find_ptoas(str(exe), env) == PtoasLookup(str(exe), (str(exe),), "--ptoas")
    link = tmp_path / "link"
    link.symlink_to(exe)
    assert find_ptoas(str(link), env).path == str(exe)  # resolved


@pytest.mark.parametrize("kind", ["missing", "not executable", "directory"])
def test_explicit_path_that_is_not_an_executable_file(tmp_path, kind):
    target = tmp_path / "ptoas"
    if kind == "not executable":
        make_exe(target, mode=0o644)
    elif kind == "directory":
        target.mkdir()
    make_exe(tmp_path / "onpath" / "ptoas")
    env = {"PATH": str(tmp_path / "onpath")}
    assert find_ptoas(str(target), env) == PtoasLookup(None, (str(target),), "--ptoas")


def test_ptoas_root_probe_order(tmp_path):
    root = tmp_path / "root"
    env = {"PTOAS_ROOT": str(root), "PATH": ""}
    tried = (str(root / "ptoas"), str(root / "ptoas.sh"), str(root / "bin" / "ptoas"))
    for rel in ("ptoas", "ptoas.sh", "bin/ptoas"):
        make_exe(root / rel)
    for expected in ("ptoas", "ptoas.sh", "bin/ptoas"):
        assert find_ptoas(None, env) == PtoasLookup(str(root / expected), tried, "PTOAS_ROOT")
        (root / expected).unlink()
    assert find_ptoas(None, env) == PtoasLookup(None, tried, "PTOAS_ROOT")


def test_ptoas_root_skips_non_executables_and_package_dirs(tmp_path):
    root = tmp_path / "root"
    (root / "ptoas").mkdir(parents=True)  # v0.51+: ptoas/ is a package directory
    make_exe(root / "ptoas.sh", mode=0o644)  # no execute bit
    make_exe(root / "bin" / "ptoas")
    assert find_ptoas(None, {"PTOAS_ROOT": str(root)}).path == str(root / "bin" / "ptoas")


def test_ptoas_root_set_but_empty_never_falls_back_to_path(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    onpath = make_exe(tmp_path / "onpath" / "ptoas")
    env = {"PTOAS_ROOT": str(root), "PATH": str(onpath.parent)}
    found = find_ptoas(None, env)
    assert found.path is None and found.source == "PTOAS_ROOT" and len(found.tried) == 3
    monkeypatch.setenv("PTOAS_ROOT", str(root))
    monkeypatch.setenv("PATH", f"{onpath.parent}{os.pathsep}{os.environ['PATH']}")
    assert find_ptoas().path is None  # env defaults to os.environ


def test_path_fallback(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    make_exe(first / "ptoas", mode=0o644)  # not executable: skipped like shutil.which does
    exe = make_exe(second / "ptoas")
    env = {"PTOAS_ROOT": "", "PATH": f"{first}{os.pathsep}{second}"}
    assert find_ptoas(None, env) == PtoasLookup(str(exe), (str(first / "ptoas"), str(exe)), "PATH")
    assert find_ptoas(None, {"PATH": str(first)}) == PtoasLookup(None, (str(first / "ptoas"),), "PATH")
    monkeypatch.delenv("PTOAS_ROOT", raising=False)
    monkeypatch.setenv("PATH", str(second))
    assert find_ptoas().path == str(exe)


# ---------------------------------------------------------------------------
# level and argv
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, level", [
    ("%t = pto.alloc_tile addr = %c0 : !pto.tile", "level3"),
    ("module {\n    %tile_0 = pto.alloc_tile valid_row = 16, addr = 4096\n}", "level3"),
    ("%0=pto.alloc_tile addr=0", "level3"),
    ("%t = pto.alloc_tile : !pto.tile_buf<vec>\n%c = arith.constant 0 // addr = 0", "level2"),
    ("%t = pto.alloc_tile : !pto.tile\naddr = 0", "level2"),  # addr on another line
    ("%t = pto.alloc_tiles addr = 0", "level2"),  # not the word alloc_tile
    ("x = pto.alloc_tile addr = 0", "level2"),  # no %ssa name
    ("// %t = pto.alloc_tile addr = 0", "level2"),
    ("%t = pto.alloc_tile myaddr = 0", "level2"),
    ("", "level2"),
])
def test_infer_level(text, level):
    assert infer_level(text) == level


def test_ptoas_argv_is_the_rebuild_command_line():
    assert ptoas_argv("/opt/ptoas", "p/u.pto", "p/u.cpp", "level3") == (
        "/opt/ptoas", "./p/u.pto", "-o", "./p/u.cpp", "--enable-insert-sync", "--pto-level=level3")
    assert ptoas_argv("/opt/ptoas", "-u.pto", "/abs/@u.cpp", "level2")[1:4] == ("./-u.pto", "-o", "/abs/@u.cpp")
    with pytest.raises(ValueError):
        ptoas_argv("ptoas", "u.pto", "u.cpp", "level1")


# ---------------------------------------------------------------------------
# ptoas_identity
# ---------------------------------------------------------------------------


def test_identity_follows_content_and_path(tmp_path):
    exe = make_exe(tmp_path / "ptoas", "\x7fELF binary v1")
    first = ptoas_identity(str(exe))
    assert first == ptoas_identity(str(exe)) and len(first) == 32
    exe.write_text("\x7fELF binary v2 (longer)")
    hashing.forget()
    assert ptoas_identity(str(exe)) != first
    copy = make_exe(tmp_path / "other" / "ptoas", exe.read_text())
    assert ptoas_identity(str(copy)) != ptoas_identity(str(exe))
    with pytest.raises(ToolchainError):
        ptoas_identity(str(tmp_path / "missing"))


@pytest.mark.parametrize("launcher", ["ptoas.sh", "ptoas"])
def test_identity_of_a_launcher_covers_bin_ptoas(tmp_path, launcher):
    script = make_exe(tmp_path / launcher, '#!/bin/sh\nexec "$(dirname "$0")/bin/ptoas" "$@"\n')
    binary = make_exe(tmp_path / "bin" / "ptoas", "\x7fELF v1")
    before = ptoas_identity(str(script))
    binary.write_text("\x7fELF v2 with more bytes")
    hashing.forget()
    after = ptoas_identity(str(script))
    assert after != before
    script.write_text('#!/bin/sh\n# edited\nexec "$(dirname "$0")/bin/ptoas" "$@"\n')
    hashing.forget()
    assert ptoas_identity(str(script)) != after


def test_identity_of_a_binary_ignores_bin_ptoas(tmp_path):
    exe = make_exe(tmp_path / "ptoas", "\x7fELF self-contained")
    binary = make_exe(tmp_path / "bin" / "ptoas", "\x7fELF v1")
    before = ptoas_identity(str(exe))
    binary.write_text("\x7fELF v2 with more bytes")
    hashing.forget()
    assert ptoas_identity(str(exe)) == before
    # bin/ptoas.sh next to bin/ptoas: the parent's bin/ptoas is the same directory's binary
    script = make_exe(tmp_path / "bin" / "ptoas.sh", "exec ./ptoas\n")
    before = ptoas_identity(str(script))
    binary.write_text("\x7fELF v3, longer again")
    hashing.forget()
    assert ptoas_identity(str(script)) != before


# ---------------------------------------------------------------------------
# the stand-in, end to end
# ---------------------------------------------------------------------------


def run_fake(*args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAKE), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_fake_ptoas_is_labelled_and_executable():
    text = FAKE.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    assert "Test stand-in for ptoas: same command line, trivial input language; it is not ptoas" in text
    assert os.access(FAKE, os.X_OK)
    assert find_ptoas(str(FAKE)).path == str(FAKE)


def test_fake_ptoas_reproduces_synth_output(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=4, pto=True)
    log = tmp_path / "log"
    units = synth.pto_units(root)
    for unit in units:
        pto = synth.pto_path(root, unit)
        level = infer_level(pto.read_text())
        out = tmp_path / f"{unit}.cpp"
        r = run_fake(*ptoas_argv(str(FAKE), str(pto), str(out), level)[1:], env={"FAKE_PTOAS_LOG": str(log)})
        assert r.returncode == 0, r.stderr
        raw = out.read_text()
        assert raw.encode() == (root / "ptoas" / f"{unit}.cpp").read_bytes()
        assert raw.startswith('#include "pto/pto-inst.hpp"\nusing namespace pto;\n')
        names = function_names(raw)
        assert names
        for name in names:
            target = find_target(root, name)
            assert split(target.read_text(), str(target))[1] == preprocess(raw)
    assert log.read_text().splitlines() == [
        f"{synth.pto_path(root, u)} {'level3' if u.endswith('_group') else 'level2'}" for u in units]


@pytest.mark.parametrize("argv", [
    [],
    ["u.pto", "-o", "u.cpp", "--enable-insert-sync"],
    ["u.pto", "-o", "u.cpp", "--enable-insert-sync", "--pto-level=level4"],
    ["u.pto", "-o", "u.cpp", "--enable-insert-sync", "--pto-level=level2", "--pto-arch", "a3"],
    ["u.pto", "u.cpp", "-o", "--enable-insert-sync", "--pto-level=level2"],
    ["u.mlir", "-o", "u.cpp", "--enable-insert-sync", "--pto-level=level2"],
])
def test_fake_ptoas_rejects_other_command_lines(tmp_path, argv):
    log = tmp_path / "log"
    r = run_fake(*argv, env={"FAKE_PTOAS_LOG": str(log)})
    assert r.returncode == 2 and "usage" in r.stderr
    assert not log.exists()


def test_fake_ptoas_failure_knobs(tmp_path):
    pto = tmp_path / "u.pto"
    out = tmp_path / "u.cpp"
    pto.write_text("// CPP: AICORE void k()\n// FAKE_PTOAS_FAIL\n")
    r = run_fake(str(pto), "-o", str(out), "--enable-insert-sync", "--pto-level=level2")
    assert r.returncode == 1 and "FAKE_PTOAS_FAIL" in r.stderr and not out.exists()

    pto.write_text("// CPP: AICORE void k()\n// FAKE_PTOAS_GARBAGE\n")
    r = run_fake(str(pto), "-o", str(out), "--enable-insert-sync", "--pto-level=level2")
    assert r.returncode == 0 and out.is_file() and function_names(out.read_text()) == []

    r = run_fake(str(tmp_path / "missing.pto"), "-o", str(out), "--enable-insert-sync", "--pto-level=level2")
    assert r.returncode == 1


@pytest.mark.slow
def test_fake_ptoas_hang_knob(tmp_path):
    pto = tmp_path / "u.pto"
    pto.write_text("// FAKE_PTOAS_HANG\n")
    log = tmp_path / "log"
    proc = subprocess.Popen([str(FAKE), str(pto), "-o", str(tmp_path / "u.cpp"), "--enable-insert-sync",
                             "--pto-level=level2"], env={**os.environ, "FAKE_PTOAS_LOG": str(log)},
                            start_new_session=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert log.read_text() == f"{pto} level2\n" and not (tmp_path / "u.cpp").exists()


def test_edited_pto_flows_into_both_group_wrappers(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=2, pto=True)
    pto = synth.pto_path(root, "main_group")
    pto.write_text(pto.read_text().replace("a[i] * 2.0f", "a[i] * 4.0f"))
    out = root / "ptoas" / "main_group.cpp"
    r = run_fake(*ptoas_argv(str(FAKE), str(pto), str(out), infer_level(pto.read_text()))[1:])
    assert r.returncode == 0, r.stderr
    body = preprocess(out.read_text())
    assert "a[i] * 4.0f" in body and "a[i] * 2.0f" not in body
    for name in function_names(out.read_text()):
        target = find_target(root, name)
        head, old, tail = split(target.read_text(), str(target))
        assert old != body
        new = splice(target.read_text(), body, str(target))
        assert split(new, str(target)) == (head, body, tail)


def test_fake_ptoas_answers_version_as_ptoas_does_labelled():
    r = run_fake("--version")
    assert r.returncode == 0 and r.stdout == f"ptoas 0.0+standin ({fake_ptoas.LABEL})\n"


def test_make_fake_ptoas_writes_a_labelled_copy_and_one_that_rejects_everything(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=3, pto=True)
    pto = synth.pto_path(root, "main_incore_2_aic")
    good = fake_ptoas.make_fake_ptoas(tmp_path / "good")
    bad = fake_ptoas.make_fake_ptoas(tmp_path / "bad", version="0.50", reject="custom op 'pto.tload' is unknown")
    for exe in (good, bad):
        assert find_ptoas(str(exe)).path == str(exe) and fake_ptoas.LABEL in exe.read_text()
        assert "nothing here is a real ptoas" in (exe.parent / "README.txt").read_text()
    version = subprocess.run([str(bad), "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("ptoas 0.50 (")
    out = tmp_path / "u.cpp"
    argv = ptoas_argv("", str(pto), str(out), "level2")[1:]
    rejected = subprocess.run([str(bad), *argv], capture_output=True, text=True, timeout=30)
    assert rejected.returncode == 1 and not out.exists()
    assert rejected.stderr == f"{argv[0]}:1:1: error: custom op 'pto.tload' is unknown\n"
    made = subprocess.run([str(good), *argv], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0 and out.read_bytes() == (root / "ptoas" / "main_incore_2_aic.cpp").read_bytes()
    assert ptoas_identity(str(good)) != ptoas_identity(str(bad))            # the copies differ by their CONFIG
