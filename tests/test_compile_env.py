"""Every input of a compile is in its key: the environment the compiler reads (`compile_env`) and the programs
its driver runs (`driver`), on the quick answer, the full path, `explain` and the artefact cache (real g++)."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import age_tree, copy_dir, settle_ctimes, which
from pypto_build.api import build
from pypto_build.platforms.host.places import host_binary
from pypto_build.testing import synth
from test_noop_quick import cli, compiled, settled

pytestmark = pytest.mark.slow

PROBE = "kernels/aiv/main_incore_1_aiv.cpp"     # the kernel that includes <envprobe.h> (`with_probe`)
UNITS = 4


def with_probe(root: Path) -> Path:
    """Kernel 1 includes <envprobe.h>, found only through the environment, and returns its ENV_PROBE."""
    kernel = root / PROBE
    kernel.write_text(kernel.read_text().replace(
        "#include <cstdint>", '#include <cstdint>\n#include <envprobe.h>\n'
        'extern "C" int env_probe() { return ENV_PROBE; }', 1))
    return root


def header_dirs(tmp_path: Path) -> dict[str, str]:
    """Two folders, each with an envprobe.h of the same name and another value."""
    found = {}
    for name, value in (("A", 1), ("B", 2)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "envprobe.h").write_text(f"#define ENV_PROBE {value}\n")
        found[name] = str(folder)
    return found


def probe_value(root: Path) -> int:
    """ENV_PROBE as the built kernel returns it (loaded from a copy: dlopen keeps a path it loaded once)."""
    copy = root.parent / f"probe-{uuid.uuid4().hex}.so"
    shutil.copyfile(root / host_binary(PROBE), copy)
    return ctypes.CDLL(str(copy)).env_probe()


def explained(root: Path, env: dict) -> dict[str, str]:
    out = subprocess.run([str(Path(sys.executable).parent / "pypto-build"), "explain", str(root)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr
    return dict(line.split(": ", 1) for line in out.stdout.splitlines() if line.startswith(("compile:", "orch:")))


@pytest.mark.parametrize("var", ["CPATH", "CPLUS_INCLUDE_PATH"])
def test_an_include_path_switched_to_a_same_named_header_rebuilds(l2, tmp_path, monkeypatch, var):
    """The header found in folder A is unchanged after the switch to B (its depfile path still holds A's): only
    the variable itself, in the compiler's identity, says the binaries are stale — to the quick answer, explain
    and the full path alike — and the rebuilt kernel has B's value."""
    dirs = header_dirs(tmp_path)
    root = with_probe(l2)
    a, b = {var: dirs["A"]}, {var: dirs["B"]}
    settled(root, a)
    assert compiled(cli("build", str(root), env=a)) == 0 and probe_value(root) == 1
    assert set(explained(root, b).values()) == {"compiler changed"}                    # explain
    assert compiled(cli("build", str(root), env=b)) == UNITS and probe_value(root) == 2  # the quick answer's record
    settled(root, a)
    assert probe_value(root) == 1
    monkeypatch.setenv(var, dirs["B"])
    result = build(root)                                                                # the full path (API)
    assert len(result.compiled) == UNITS and probe_value(root) == 2
    assert {u.reason for u in result.units if u.task in result.compiled} == {"compiler changed"}
    assert build(root).compiled == []


def assembler(folder: Path, note: str = "") -> Path:
    """A labelled test stand-in `as` in `folder`: logs that it ran (beside the folder), then runs the real one."""
    real, log = which("as"), folder.parent / f"{folder.name}-as-calls.log"
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "as"
    wrapper.write_text(f"#!/bin/sh\n# test stand-in assembler{note}\necho ran >> '{log}'\nexec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    return log


def test_another_assembler_earlier_on_an_unchanged_path_rebuilds(l2, tmp_path, monkeypatch):
    """PATH stays as it was; an `as` appears in a folder before the real one: the driver runs it, so every unit
    rebuilds (quick answer), and so does a change of that `as` alone (full path)."""
    early = tmp_path / "bin"
    early.mkdir()
    env = {"PATH": f"{early}{os.pathsep}{os.environ['PATH']}"}
    root = settled(l2, env)
    assert compiled(cli("build", str(root), env=env)) == 0
    log = assembler(early)
    assert compiled(cli("build", str(root), env=env)) == UNITS
    assert log.read_text().count("ran") == UNITS, "the compiles ran the new assembler"
    settled(root, env)
    assembler(early, note=", edited")                   # same path, other content
    settle_ctimes()
    monkeypatch.setenv("PATH", env["PATH"])
    result = build(root)
    assert len(result.compiled) == UNITS
    assert build(root).compiled == []


def test_compiler_path_with_an_assembler_rebuilds(l2, tmp_path):
    """$COMPILER_PATH naming a folder with an `as`: the driver runs that one (quick answer); and one created later
    in a folder $COMPILER_PATH already named is seen too."""
    root = settled(l2)
    first, later = tmp_path / "tools", tmp_path / "later"
    log = assembler(first)
    later.mkdir()
    env = {"COMPILER_PATH": str(first)}
    assert compiled(cli("build", str(root), env=env)) == UNITS
    assert log.read_text().count("ran") == UNITS
    env = {"COMPILER_PATH": str(later)}
    settled(root, env)
    assert compiled(cli("build", str(root), env=env)) == 0
    log = assembler(later)
    assert compiled(cli("build", str(root), env=env)) == UNITS and log.read_text().count("ran") == UNITS


def test_the_artefact_cache_keys_on_the_include_path(tmp_path, monkeypatch):
    """A binary built under CPATH=A:B (A's envprobe.h read) and stored is not handed to a fresh copy built under
    CPATH=B:A (B's read; both folders are include roots either way, and A's header is unchanged), which the same
    CPATH still gets from the cache."""
    dirs = header_dirs(tmp_path)
    cache = tmp_path / "cache"
    first = with_probe(synth.write_l2(tmp_path / "first", kernels=3))
    other, same = copy_dir(first, tmp_path / "other"), copy_dir(first, tmp_path / "same")     # never built
    a_first, b_first = os.pathsep.join([dirs["A"], dirs["B"]]), os.pathsep.join([dirs["B"], dirs["A"]])
    monkeypatch.setenv("CPATH", a_first)
    assert len(build(first, cache_dir=cache).compiled) == UNITS and probe_value(first) == 1
    monkeypatch.setenv("CPATH", b_first)
    result = build(other, cache_dir=cache)
    assert (len(result.compiled), result.from_cache) == (UNITS, []) and probe_value(other) == 2
    monkeypatch.setenv("CPATH", a_first)
    assert len(build(same, cache_dir=cache).from_cache) == UNITS and probe_value(same) == 1


def test_dependencies_output_is_ignored_and_never_written(l2, tmp_path):
    """DEPENDENCIES_OUTPUT / SUNPRO_DEPENDENCIES: every compile passes -MD -MF, which GCC then follows, so they
    are in no key; the include-directory probe (no -M) runs without them, so nothing writes the files they name."""
    (l2 / ".pypto_build/search_dirs.json").unlink()         # asked again: the probe runs
    age_tree(l2)
    named = {"DEPENDENCIES_OUTPUT": str(tmp_path / "deps.out"), "SUNPRO_DEPENDENCIES": f"{tmp_path / 'sun.out'} t"}
    assert compiled(cli("build", str(l2), env=named)) == 0
    assert compiled(cli("build", "--recompile", str(l2), env=named)) == UNITS
    assert not (tmp_path / "deps.out").exists() and not (tmp_path / "sun.out").exists()


def test_the_programs_are_asked_once_and_kept_while_what_they_rest_on_is_unchanged(l2, tmp_path, monkeypatch):
    """Five driver runs when first asked, none in later runs (`search_dirs.json`), asked again once a file appears
    in a folder searched before the one the driver's `as` was found in."""
    log, early = tmp_path / "cxx.log", tmp_path / "bin"
    early.mkdir()
    cxx = tmp_path / "logged-g++"
    cxx.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {which("g++")} "$@"\n')
    cxx.chmod(0o755)
    env = {"CXX": str(cxx), "PATH": f"{early}{os.pathsep}{os.environ['PATH']}"}

    def asked() -> int:
        said = log.read_text().splitlines() if log.exists() else []
        log.write_text("")
        return sum(1 for line in said if "-print-prog-name=" in line or "-print-search-dirs" in line)

    assert compiled(cli("build", str(l2), env=env)) == UNITS and asked() == 5
    settle_ctimes()
    assert compiled(cli("build", "--recompile", str(l2), env=env)) == UNITS and asked() == 0
    (early / "unrelated-tool").write_text("")
    settle_ctimes()
    assert compiled(cli("build", str(l2), env=env)) == 0 and asked() == 5      # the same programs: nothing rebuilt
