"""A launcher cannot install or cache a wrong binary, and its lines say what is so (issue 25, items 9 and 13).

The launchers here are stand-ins written by the tests (labelled as such in their text): each runs the
compile it is given the way a broken launcher would — exits 0 having written nothing, writes the object
elsewhere, or compiles another source — so what the build does with such an object is real: real g++,
real ld, real doit, real files.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir
from pypto_build.toolchain import launcher
from pypto_build.errors import ToolchainError

pytestmark = pytest.mark.slow

KERNELS = 3         # the session fixture `built_l2`: three kernels and an orchestration (-g: compiled here whole)

STAND_IN = '''#!{python}
"""Stand-in compile launcher written by tests/test_launcher_checks.py (not a real tool): {mode}."""
import subprocess, sys
args = sys.argv[1:]
mode = {mode!r}
if mode == "writes nothing":
    sys.exit(0)
o = len(args) - 1 - args[::-1].index("-o")
if mode == "writes the object elsewhere":
    args[o + 1] += ".elsewhere.o"
elif mode == "compiles another source":
    args[-1] = {other!r}
sys.exit(subprocess.call(args))
'''


def stand_in(where: Path, mode: str) -> Path:
    other = where / "no_entry.cpp"
    other.write_text('extern "C" int not_the_entry(void) { return 0; }\n')
    script = where / "stand-in-launcher"
    script.write_text(STAND_IN.format(python=sys.executable, mode=mode, other=str(other)))
    script.chmod(0o755)
    return script


def pypto_build(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def kernel_binaries(root: Path) -> list[Path]:
    return sorted(p for p in (root / ".pypto_build" / "host").rglob("*.so") if "/kernels/" in p.as_posix())


@pytest.mark.parametrize("mode", ["writes nothing", "writes the object elsewhere", "compiles another source"])
def test_a_launcher_output_that_is_not_the_kernel_is_neither_installed_nor_cached(built_l2, tmp_path, mode):
    root = copy_dir(built_l2, tmp_path / "d")
    for built in kernel_binaries(root):
        built.unlink()                          # the copy's kernels must be built again (its orchestration is kept)
    script = stand_in(tmp_path, mode)
    cache = tmp_path / "cache"
    done = pypto_build("build", "--launcher", str(script), "--cache-dir", str(cache), str(root))
    assert done.returncode == 1, done.stdout + done.stderr
    failed = [line for line in (done.stdout + done.stderr).splitlines() if "compiling failed" in line]
    assert failed, done.stdout + done.stderr             # (the build stops at the first failure)
    assert all("stand-in-launcher" in line and "exited 0 but" in line and "binary not installed" in line
               for line in failed), failed
    assert "Traceback" not in done.stderr
    assert kernel_binaries(root) == []          # nothing installed ...
    fresh = copy_dir(built_l2, tmp_path / "fresh")
    for built in kernel_binaries(fresh):
        built.unlink()
    again = pypto_build("build", "--cache-dir", str(cache), str(fresh))
    assert again.returncode == 0, again.stderr
    assert f"{KERNELS} compiled" in again.stdout and "from cache" not in again.stdout, again.stdout   # ... nor stored
    rebuilt = pypto_build("build", str(root))   # nothing wrong was recorded: without the launcher they build
    assert rebuilt.returncode == 0 and f"{KERNELS} compiled" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr
    assert len(kernel_binaries(root)) == KERNELS


def test_a_launcher_that_compiles_what_it_is_given_passes_the_checks(built_l2, tmp_path):
    root = copy_dir(built_l2, tmp_path / "d")
    expected = {p.name: p.read_bytes() for p in kernel_binaries(root)}
    for built in kernel_binaries(root):
        built.unlink()
    done = pypto_build("build", "--launcher", str(stand_in(tmp_path, "passes it on")), str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{KERNELS} compiled" in done.stdout
    assert {p.name: p.read_bytes() for p in kernel_binaries(root)} == expected    # the same bytes as a plain build


def test_a_relative_launcher_is_resolved_where_it_was_given(built_l2, tmp_path):
    root = copy_dir(built_l2, tmp_path / "d")
    for built in kernel_binaries(root):
        built.unlink()
    here = tmp_path / "here"
    here.mkdir()
    stand_in(here, "passes it on")
    for args, env in ((["--launcher", "./stand-in-launcher"], {}),
                      ([], {"PYPTO_BUILD_LAUNCHER": "./stand-in-launcher"})):
        done = pypto_build("build", "--recompile", *args, str(root), cwd=here, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{KERNELS} of {KERNELS + 1} compiles go through stand-in-launcher" in done.stdout, done.stdout
    gone = pypto_build("build", "--launcher", "./no-such-launcher", str(root), cwd=here)
    assert gone.returncode == 2
    assert gone.stderr.strip().splitlines() == [
        "pypto-build: error: compile launcher './no-such-launcher' not found (from --launcher='./no-such-launcher'); "
        "install it, or give its path, or unset --launcher"]


@pytest.mark.parametrize("tool", ["icecc", "ccache", "sccache", "distcc"])
def test_a_missing_launcher_from_cxx_names_cxx_the_tool_and_its_package(tmp_path, tool):
    env = {"PATH": str(tmp_path), "CXX": f"{tool} g++"}
    with pytest.raises(ToolchainError) as caught:
        launcher.find(None, env, from_cxx=(tool,))
    assert str(caught.value) == (f"compile launcher '{tool}' not found on PATH (from CXX='{tool} g++'); install it "
                                 f"(apt install {tool}), or drop it from CXX")
    with pytest.raises(ToolchainError, match=rf"from --launcher='{tool}'\); install it \(apt install {tool}\), or "
                                             r"unset --launcher"):
        launcher.find(tool, env)


def test_cxx_with_a_missing_ccache_is_one_line_from_the_command(built_l2, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "g++").symlink_to(subprocess.run(["sh", "-c", "command -v g++"], capture_output=True, text=True,
                                                check=True).stdout.strip())
    root = copy_dir(built_l2, tmp_path / "d")
    done = pypto_build("build", str(root), env={"CXX": "ccache g++", "PATH": f"{bin_dir}:{Path(sys.executable).parent}"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "pypto-build: error: compile launcher 'ccache' not found on PATH (from CXX='ccache g++'); install it "
        "(apt install ccache), or drop it from CXX"]
