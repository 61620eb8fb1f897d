"""Hostile directories: escapes are refused, nothing from the directory runs, nothing is written outside.

Issue 7, requirement 4. Every check goes through the real command line (real g++, real processes).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from conftest import HOST_STATE_DB, copy_dir
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.cache.store import ArtifactCache
from pypto_build.platforms.host.places import HOST_OUTPUTS, HOST_STAMP, host_binary, host_external_binary

pytestmark = pytest.mark.slow

ESCAPE = "resolves outside the build directory"
K1 = "kernels/aiv/main_incore_1_aiv"          # the AIV kernel of an L2 fixture (includes no header)
K0 = "kernels/aic/main_incore_0_aic"          # includes ../common.h


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below `root` (links not followed): kind, target or content digest, mtime."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for path in (Path(dirpath, name) for name in dirnames + filenames):
            out[path.relative_to(root).as_posix()] = (
                ("link", os.readlink(path)) if path.is_symlink() else ("dir",) if path.is_dir() else
                ("file", hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns))
    return out


def assert_refused(proc: subprocess.CompletedProcess, *names: str) -> None:
    """Non-zero exit, one line on stderr naming the file, saying what is wrong and how to fix it."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert ESCAPE in lines[0], lines[0]
    assert "; " in lines[0].split(ESCAPE, 1)[1], f"no fix given: {lines[0]}"
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.fixture(scope="session")
def built_l2p(tmp_path_factory) -> Path:
    """A built L2 dir with golden.py and the ptoas/ stage."""
    root = synth.write_l2(tmp_path_factory.mktemp("hostile") / "l2", kernels=3, golden=True, pto=True)
    build(root)
    return root


@pytest.fixture(scope="session")
def built_multi(tmp_path_factory) -> Path:
    root = synth.write_multi_orch(tmp_path_factory.mktemp("hostile_m") / "m", golden=True)
    build(root)
    return root


@pytest.fixture
def l2p(built_l2p, tmp_path) -> Path:
    return copy_dir(built_l2p, tmp_path / "l2")


def _edit_config(root: Path, old: str, new: str) -> None:
    cfg = root / "kernel_config.py"
    assert old in cfg.read_text()
    cfg.write_text(cfg.read_text().replace(old, new, 1))


def _set_source(root: Path, rel: str, expr: str) -> None:
    _edit_config(root, 'str(_ROOT_DIR / "' + '" / "'.join(rel.split("/")) + '")', expr)


def _move_out(root: Path, rel: str, outside: Path) -> Path:
    """Move `rel` outside and leave a symlink to it in its place; return the outside path."""
    dest = outside / Path(rel).name
    shutil.move(str(root / rel), dest)
    os.symlink(dest, root / rel)
    return dest


def _link_out(root: Path, rel: str, outside: Path, *, directory: bool = False) -> None:
    """Replace `rel` (if any) by a symlink to a new, empty file or directory outside."""
    target = outside / Path(rel).name
    if directory:
        target.mkdir()
    else:
        target.write_bytes(b"")
    if (root / rel).is_dir() and not (root / rel).is_symlink():
        shutil.rmtree(root / rel)
    else:
        (root / rel).unlink(missing_ok=True)
    os.symlink(target, root / rel)


# name -> (how to make the directory hostile, the path the one line must name)
ESCAPES: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "source via ..": (lambda r, o: (shutil.copy(r / f"{K1}.cpp", o / "k.cpp"),
                                    _set_source(r, f"{K1}.cpp", 'str(_ROOT_DIR / ".." / "outside" / "k.cpp")')),
                      "outside/k.cpp"),
    "source absolute": (lambda r, o: (shutil.copy(r / f"{K1}.cpp", o / "k.cpp"),
                                      _set_source(r, f"{K1}.cpp", repr(str(o / "k.cpp")))), "outside/k.cpp"),
    "source symlinked file": (lambda r, o: _move_out(r, f"{K1}.cpp", o), f"{K1}.cpp"),
    "source symlinked dir": (lambda r, o: _move_out(r, "kernels/aiv", o), f"{K1}.cpp"),
    "extra include dir": (lambda r, o: _edit_config(r, '"core_type": "aiv",', '"core_type": "aiv", '
                                                    '"extra_include_dirs": [str(_ROOT_DIR / ".." / "outside")],'),
                          "include dir of kernel"),
    "orchestration source": (lambda r, o: _move_out(r, "orchestration", o), "orchestration/main.cpp"),
    "kernel_config.py symlinked": (lambda r, o: _move_out(r, "kernel_config.py", o), "kernel_config.py"),
    "ptoas unit": (lambda r, o: _move_out(r, "ptoas/main_group.pto", o), "ptoas/main_group.pto"),
    "ptoas dir (raw output)": (lambda r, o: _move_out(r, "ptoas", o), "ptoas/main_"),
    "binary target": (lambda r, o: _link_out(r, host_binary(f"{K1}.cpp"), o), host_binary(f"{K1}.cpp")),
    # in the state folder, whose every entry is checked: the line names the link itself
    "stamp folder": (lambda r, o: _link_out(r, os.path.dirname(HOST_STAMP), o, directory=True),
                     os.path.dirname(HOST_STAMP)),
    "host outputs folder": (lambda r, o: _link_out(r, HOST_OUTPUTS, o, directory=True), HOST_OUTPUTS),
    "state folder": (lambda r, o: _link_out(r, ".pypto_build", o, directory=True), ".pypto_build"),
    "state lock": (lambda r, o: _link_out(r, ".pypto_build/lock", o), ".pypto_build/lock"),
    "state database": (lambda r, o: _link_out(r, HOST_STATE_DB, o), HOST_STATE_DB),
    "platform state folder": (lambda r, o: _link_out(r, os.path.dirname(HOST_STATE_DB), o, directory=True),
                              os.path.dirname(HOST_STATE_DB)),
}


@pytest.mark.parametrize("case", list(ESCAPES))
def test_escape_is_refused_in_one_line_and_nothing_is_written(l2p, tmp_path, case):
    make_hostile, named = ESCAPES[case]
    outside = tmp_path / "outside"
    outside.mkdir()
    synth.kernel_path(l2p, 1).write_text(synth.kernel_path(l2p, 1).read_text() + "// edited\n")  # work to do
    make_hostile(l2p, outside)
    before, before_out = snapshot(l2p), snapshot(outside)
    for args in (["build"], ["build", "--dry-run"], ["explain"], ["compdb"], ["replay", "--validate"]):
        assert_refused(run("pypto-build", *args, str(l2p)), named)
    assert_refused(run("pypto-build", "doit", "list", str(l2p)), named)
    assert snapshot(l2p) == before, "nothing written into the directory"
    assert snapshot(outside) == before_out, "nothing written outside"


@pytest.mark.parametrize("kind", ["l3 chip", "l3 leftover chip", "multi-orch"])
def test_next_levels_entry_linked_outside_is_refused(built_l3, built_multi, tmp_path, kind):
    root = copy_dir(built_multi if kind == "multi-orch" else built_l3, tmp_path / "d")
    outside = tmp_path / "outside"
    outside.mkdir()
    if kind == "l3 leftover chip":            # never referenced by host_orch.py: not built, still refused
        synth.write_l2(outside / "old_chip", kernels=1)
        os.symlink(outside / "old_chip", root / "next_levels" / "old_chip")
        name = "old_chip"
    else:
        name = "chip_b" if kind == "l3 chip" else "orch_b"
        _move_out(root, f"next_levels/{name}", outside)
    before, before_out = snapshot(root), snapshot(outside)
    for args in (["build"], ["explain"], ["build", "--dry-run"]):
        assert_refused(run("pypto-build", *args, str(root)), f"next_levels/{name}")
    assert snapshot(root) == before and snapshot(outside) == before_out


def test_replay_refuses_dfx_outputs_linked_outside(l2p, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, l2p / "dfx_outputs")
    out = run("pypto-build", "replay", "--swimlane", "--dump-args", "1", str(l2p))
    assert out.returncode == 2              # refused by the child: the user's to fix (exit 2), not a failed program
    assert "dfx_outputs" in out.stderr and ESCAPE in out.stderr and "Traceback" not in out.stderr
    assert list(outside.iterdir()) == []
    (l2p / "dfx_outputs").unlink()
    (l2p / "dfx_outputs").mkdir()
    os.symlink(outside, l2p / "dfx_outputs" / "args_dump")         # a link deeper down is refused too
    assert run("pypto-build", "replay", "--dump-args", "1", str(l2p)).returncode == 2
    assert list(outside.iterdir()) == []
    assert run("pypto-build", "replay", str(l2p)).returncode == 0, "no dfx requested: nothing written there"


def test_emit_runner_and_compdb_refuse_targets_linked_outside(l2p, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, l2p / "debug")
    assert_refused(run("pypto-build", "emit-runner", str(l2p)), "debug/run.py")
    os.symlink(outside / "cc.json", l2p / "compile_commands.json")
    assert_refused(run("pypto-build", "compdb", str(l2p)), "compile_commands.json")
    assert list(outside.iterdir()) == []
    explicit = run("pypto-build", "compdb", "-o", str(outside / "mine.json"), str(l2p))
    assert explicit.returncode == 0 and (outside / "mine.json").is_file(), "an explicit -o goes where it says"


def test_external_kernel_builds_and_its_output_stays_inside(l2p, tmp_path):
    ext = tmp_path / "ext" / "my_kernel.cpp"
    ext.parent.mkdir()
    (ext.parent / "ext_common.h").write_text("#define EXT_SCALE 1\n")
    ext.write_text('#include "ext_common.h"\n' + synth.kernel_path(l2p, 1).read_text())
    _set_source(l2p, f"{K1}.cpp", f'{str(ext)!r}, "external": True')
    out = run("pypto-build", "build", str(l2p))
    assert out.returncode == 0, out.stderr
    binary = host_external_binary(1, "aiv", "my_kernel")
    assert (l2p / binary).is_file()
    assert sorted(p.name for p in ext.parent.iterdir()) == ["ext_common.h", "my_kernel.cpp"]
    _link_out(l2p, os.path.dirname(binary), tmp_path, directory=True)
    assert_refused(run("pypto-build", "build", "--recompile", str(l2p)), os.path.dirname(binary))
    assert list((tmp_path / "external").iterdir()) == []


# Headers: every file the compiler read (its -MD depfile) resolves inside the build directory
# or under an include root the tool passes itself.

def _include(path: Path, line: str) -> None:
    text = path.read_text()
    path.write_text(text.replace('#include "tensor.h"', f'#include "tensor.h"\n{line}', 1))


def _hostile_header(root: Path, outside: Path, how: str) -> str:
    """Make kernel 1 (or, transitively, kernels 0 and 2) read `outside`; return the failing unit's source."""
    (outside / "outside.h").write_text("#define OUTSIDE_HEADER 1\n")
    if how == "relative ..":      # kernels/aiv/../../../outside.h == <tmp>/outside.h
        shutil.copy(outside / "outside.h", root.parent / "outside.h")
        _include(root / f"{K1}.cpp", '#include "../../../outside.h"')
    elif how == "absolute":
        _include(root / f"{K1}.cpp", f'#include "{outside / "outside.h"}"')
    elif how == "symlinked header":
        os.symlink(outside / "outside.h", root / "kernels" / "evil.h")
        _include(root / f"{K1}.cpp", '#include "../evil.h"')
    else:                         # an inside header that includes an outside one
        with open(root / "kernels/common.h", "a") as handle:
            handle.write(f'#include "{outside / "outside.h"}"\n')
        return f"{K0}.cpp"
    return f"{K1}.cpp"


@pytest.mark.parametrize("how", ["relative ..", "absolute", "symlinked header", "transitive"])
def test_header_outside_fails_the_unit_and_installs_nothing(l2p, tmp_path, how):
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    source = _hostile_header(l2p, outside, how)
    binary = l2p / host_binary(source)
    assert binary.is_file(), "built before the edit"
    out = run("pypto-build", "build", "-k", "--recompile", "--cache-dir", str(cache), str(l2p))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ESCAPE in ln]
    assert any(source in ln for ln in lines)
    assert all("outside.h" in ln and "keep headers inside the build directory" in ln for ln in lines)
    assert not binary.exists(), "no binary built from an outside header stays at the target"
    assert not (l2p / HOST_STAMP).exists()
    entries = ArtifactCache(cache).stats().entries
    assert entries > 0, "the other units were stored"
    again = run("pypto-build", "build", "-k", "--cache-dir", str(cache), str(l2p))
    assert again.returncode == 1 and ESCAPE in again.stderr, "still refused: the failure was not recorded"
    assert ArtifactCache(cache).stats().entries == entries, "nothing stored for the refused unit"


def test_cache_entry_with_a_header_now_outside_is_not_restored(l2p, tmp_path):
    """Directory A stored kernel 1 built with an inside header; in B the same header is a link outside."""
    cache = tmp_path / "cache"
    (l2p / "kernels/evil.h").write_text("#define OUTSIDE_HEADER 1\n")
    _include(l2p / f"{K1}.cpp", '#include "../evil.h"')
    clone = copy_dir(l2p, tmp_path / "b")
    assert run("pypto-build", "build", "--cache-dir", str(cache), str(l2p)).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    _move_out(clone, "kernels/evil.h", outside)                   # same content, now outside
    out = run("pypto-build", "build", "--cache-dir", str(cache), str(clone))
    assert out.returncode == 1 and ESCAPE in out.stderr and "evil.h" in out.stderr
    assert (clone / host_binary(f"{K0}.cpp")).exists()
    assert not (clone / host_binary(f"{K1}.cpp")).exists()


def test_external_kernel_may_include_its_own_dir_and_extra_include_dirs_only(l2p, tmp_path):
    ext = tmp_path / "ext"
    (ext / "inc").mkdir(parents=True)
    (ext / "own.h").write_text("#define OWN 1\n")
    (ext / "inc" / "listed.h").write_text("#define LISTED 1\n")
    (tmp_path / "elsewhere.h").write_text("#define ELSEWHERE 1\n")
    source = ext / "k.cpp"
    source.write_text('#include "own.h"\n#include "listed.h"\n' + synth.kernel_path(l2p, 1).read_text())
    _set_source(l2p, f"{K1}.cpp", f'{str(source)!r}, "external": True, "extra_include_dirs": [{str(ext / "inc")!r}]')
    assert run("pypto-build", "build", str(l2p)).returncode == 0
    source.write_text(f'#include "{tmp_path / "elsewhere.h"}"\n' + source.read_text())
    out = run("pypto-build", "build", str(l2p))
    assert out.returncode == 1 and ESCAPE in out.stderr and "elsewhere.h" in out.stderr


def test_cxxflags_include_dirs_are_the_users_own(l2p, tmp_path):
    """Not refused: an include root passed through $CXXFLAGS is the environment's, like the system's."""
    (tmp_path / "sysinc").mkdir()
    (tmp_path / "sysinc" / "site.h").write_text("#define SITE 1\n")
    _include(l2p / f"{K1}.cpp", '#include "site.h"')
    out = run("pypto-build", "build", str(l2p), env={"CXXFLAGS": f"-I{tmp_path / 'sysinc'}"})
    assert out.returncode == 0, out.stderr


# Planted side effects: listing, explaining, dry-running (and building) execute nothing from the dir.

PLANTED_MODULES = ("sitecustomize", "usercustomize", "doit", "json", "xxhash", "argparse", "pathlib", "torch",
                   "pypto_build")


def _marker_code(marks: Path, label: str) -> str:
    return f"open({str(marks / label)!r}, 'w').close()\n"


def _plant(root: Path, marks: Path) -> list[Path]:
    """Code that creates marks/<label> when run or imported, everywhere a tool could pick it up."""
    planted = []

    def prepend(path: Path, label: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text() if path.exists() else ""
        path.write_text(_marker_code(marks, label) + old)
        planted.append(path)

    for name in ("kernel_config.py", "golden.py", "orchestration/host_orch.py"):
        for path in [root / name, *root.glob(f"next_levels/*/{name}")]:
            if path.exists():
                prepend(path, path.relative_to(root).as_posix().replace("/", "__"))
    prepend(root / "dodo.py", "dodo.py")
    prepend(root / "debug/run.py", "debug__run.py")
    for name in PLANTED_MODULES:
        prepend(root / f"{name}.py", f"module:{name}")
    for tool in ("g++", "c++", "ptoas.sh"):      # never looked up in the directory
        (root / tool).write_text(f"#!/bin/sh\ntouch {marks / ('tool:' + tool)}\n")
        (root / tool).chmod(0o755)
    (root / "doit.cfg").write_text(f"[GLOBAL]\ndep_file = {marks / 'doit.cfg-dep'}\n[build]\n"
                                   f"outfile = {marks / 'doit.cfg-out'}\n")
    (root / "pyproject.toml").write_text(
        f'[tool.doit]\ndep_file = "{marks / "pyproject-dep"}"\n[tool.doit.commands.build]\n'
        f'outfile = "{marks / "pyproject-out"}"\n')
    return planted


@pytest.mark.parametrize("kind", ["l2", "l3", "multi-orch"])
def test_planted_code_never_runs_when_listing_explaining_or_building(built_l2p, built_l3, built_multi, tmp_path,
                                                                      kind):
    source = {"l2": built_l2p, "l3": built_l3, "multi-orch": built_multi}[kind]
    root = copy_dir(source, tmp_path / "d")
    marks = tmp_path / "marks"
    marks.mkdir()
    planted = _plant(root, marks)
    for path in planted:                                           # the plants work when run
        run(sys.executable, str(path), cwd=tmp_path)
    assert len(list(marks.iterdir())) == len(planted)
    shutil.rmtree(marks)
    marks.mkdir()
    task = {"l2": "stamp:.", "l3": "stamp:chip_a", "multi-orch": "stamp:orch_a"}[kind]
    d = str(root)
    tool = ["pypto-build"]
    commands = [tool + ["explain", d], tool + ["explain", "--all", d], tool + ["build", "--dry-run", d],
                tool + ["doit", "list", "--all", "--status", d], tool + ["doit", "info", d, task],
                tool + ["compdb", "-o", str(tmp_path / "cc.json"), d], tool + ["build", d],
                tool + ["build", "--recompile", d], ["doit", "pypto-build"], ["doit", "pypto-build", "--recompile"]]
    python_m = [[sys.executable, "-m", "pypto_build", "explain", d], [sys.executable, "-m", "pypto_build", "build", d]]
    runs = [(root, a) for a in commands + python_m]
    if kind == "l2":        # from outside the directory too (the plants are the same for every kind)
        runs += [(tmp_path, a) for a in commands + python_m if a[0] != "doit"]
    for cwd, argv in runs:
        if argv[0] == sys.executable and cwd == root:
            # `python -m X` runs ./X.py when it exists, before any of our code (Python's rule; the console
            # script and `python -P -m` do not look there): the one plant that cannot be defended.
            (root / "pypto_build.py").unlink(missing_ok=True)
        out = run(*argv, cwd=cwd)
        assert out.returncode == 0, (argv, out.stdout, out.stderr)
        assert list(marks.iterdir()) == [], (argv, cwd, sorted(p.name for p in marks.iterdir()))


# Nothing written outside the directory, its state folder and the configured cache.

KNOWN_INSIDE = (".pypto_build/", "dfx_outputs/", "debug/run.py", "compile_commands.json")


def _known(rel: str) -> bool:
    """Where pypto_build may create files in a build directory (the host binaries and stamp are in the state
    folder, places.HOST_OUTPUTS: nothing goes where PyPTO keeps its own, beside the sources or in cache/)."""
    parts = rel.split("/")
    stripped = "/".join(parts[2:]) if parts[0] == "next_levels" and len(parts) > 2 else rel
    return any(stripped == k.rstrip("/") or stripped.startswith(k) for k in KNOWN_INSIDE)


@pytest.mark.parametrize("kind", ["l2", "l3"])
def test_nothing_is_written_outside_the_directory_state_and_cache(tmp_path, kind):
    parent = tmp_path / "parent"
    root = parent / "d"
    if kind == "l2":
        synth.write_l2(root, kernels=3, golden=True, pto=True)
    else:
        synth.write_l3(root, golden=True)
    cache = parent / "c"
    # a $TMPDIR too long for a Unix socket under it: sharing tensors with rank workers must still work
    home, tmp, xdg = (tmp_path / n for n in ("home", "tmp_" + "x" * 100, "xdg"))
    for d in (home, tmp, xdg):
        d.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(xdg), "PYTHONDONTWRITEBYTECODE": ""}
    before = snapshot(root)
    d = str(root)
    commands = [["build", "--cache-dir", str(cache), d], ["build", d],
                ["replay", "--validate", "--swimlane", "--dump-args", "1", d], ["validate", d], ["compdb", d]]
    if kind == "l2":
        commands.append(["emit-runner", d])
    for argv in commands:
        out = run("pypto-build", *argv, cwd=parent, env=env)
        assert out.returncode == 0, (argv, out.stdout, out.stderr)
    assert sorted(p.name for p in parent.iterdir()) == ["c", "d"]
    assert list(home.iterdir()) == []
    # the user's cache folder holds only the kept variants' store (every verdict keeps its binaries there)
    assert [p.relative_to(xdg).as_posix() for p in xdg.glob("*/*")] == ["pypto_build/variants"]
    assert list(tmp.iterdir()) == [], "temporary files left behind"
    created = sorted(set(snapshot(root)) - set(before))
    files = [rel for rel in created if (root / rel).is_file()]
    assert files and [rel for rel in files if not _known(rel)] == []
    changed = [rel for rel, v in before.items() if snapshot(root).get(rel) != v and v[0] == "file"]
    assert changed == [], "no file of the directory is modified"
