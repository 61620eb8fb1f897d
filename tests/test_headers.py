"""Header tracking is exact wherever the compiler finds headers (real g++, real git, real files).

`-MMD` leaves out what g++ deems system headers (everything under `-isystem`, a file after
`#pragma GCC system_header` and all it includes); a depfile word may hold `:`; a PTO-ISA
checkout's git-ignored headers are not in its revision. Each is tracked per unit here, and a
header outside the build directory and the include roots is refused through each of them.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import edit, git
from pypto_build.api import build
from pypto_build.toolchain.identity import clean_git_revision
from pypto_build.builddir.state_dir import STATE_DB, state_folder
from pypto_build.platforms.host.places import HOST_STAMP, host_binary

HOST = state_folder("host")                     # the host platform's build state (database, header sets)
K1 = "compile:aiv/main_incore_1_aiv"            # the AIV kernel of the L2 fixture: includes no header of the dir
K1_SRC = "kernels/aiv/main_incore_1_aiv.cpp"
KERNELS = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic", K1]
ESCAPE = "resolves outside the build directory"


def include(root: Path, *lines: str) -> None:
    """Add `#include` lines to kernel 1, after its last include."""
    src = root / K1_SRC
    src.write_text(src.read_text().replace('#include "tensor.h"', "\n".join(['#include "tensor.h"', *lines]), 1))


def reasons(result) -> dict[str, str]:
    return {u.task: u.reason for u in result.units if u.task in result.compiled}


@pytest.mark.slow
def test_headers_under_an_isystem_dir_of_cxxflags_are_tracked(l2, tmp_path, monkeypatch):
    sysinc = tmp_path / "sysinc"
    sysinc.mkdir()
    (sysinc / "site.h").write_text("#define SITE 1\n")
    include(l2, "#include <site.h>")
    monkeypatch.setenv("CXXFLAGS", f"-isystem {sysinc}")
    assert len(build(l2).compiled) == 4                 # new flags
    edit(sysinc / "site.h")
    result = build(l2)
    assert result.compiled == [K1]
    assert reasons(result)[K1] == f"header {sysinc}/site.h changed"
    assert build(l2).compiled == []
    from pypto_build.compile import header_sets
    named = {values_of(l2, t)["outside"] for t in [*KERNELS, "orch:main"]}
    assert {p.name for p in (l2 / header_sets.sets_dir(HOST)).iterdir()} == {f"{n}.json" for n in named}, \
        "the record of the set before the edit was pruned"


def test_a_system_header_pragma_hides_nothing_it_includes(l2):
    (l2 / "kernels/vendor.h").write_text('#pragma GCC system_header\n#include "vendor_impl.h"\n')
    (l2 / "kernels/vendor_impl.h").write_text("#define VENDOR 1\n")
    include(l2, '#include "../vendor.h"')
    assert build(l2).compiled == [K1]
    edit(l2 / "kernels/vendor_impl.h")
    result = build(l2)
    assert result.compiled == [K1]
    assert reasons(result)[K1] == "header kernels/vendor_impl.h changed"


def values_of(root: Path, task: str) -> dict:
    from pypto_build.engine.statedb import open_state
    dep = open_state(root / HOST / STATE_DB, adopt=False)
    try:
        return dep.get_values(task)
    finally:
        dep.backend.discard()


def test_system_headers_of_the_compiler_are_tracked_in_one_shared_set(l2):
    """-MD lists <cstdint> and what it includes: inputs like any other, their states kept once for all units."""
    from pypto_build.compile import header_sets
    sets = {task: values_of(l2, task)["outside"] for task in KERNELS}
    assert len(set(sets.values())) == 1, "the three kernels read the same system headers: one record"
    states = header_sets.read(sets[K1], HOST, l2)
    assert any(h.endswith("/cstdint") and h.startswith("/") for h in states), sorted(states)
    assert not any(h.startswith("/") for h in values_of(l2, K1)["headers"]), "no per-unit copy"
    assert sorted(p.name for p in (l2 / header_sets.sets_dir(HOST)).iterdir()) == \
        sorted({f"{n}.json" for n in [*sets.values(), values_of(l2, "orch:main")["outside"]]})


NAMES = ["a:b.h", "with space.h", "hash#1.h", "dollar$1.h", "back\\slash.h", "tab\there.h", "c:\\d e#f$.h"]


@pytest.mark.slow
def test_header_names_make_syntax_would_split_are_tracked(l2):
    """g++ writes `:` as is, `\\ ` for a space, `\\#`, `$$`; each name is read back exactly and tracked."""
    for i, name in enumerate(NAMES):
        (l2 / "kernels" / name).write_text(f"#define ODD_NAME_{i} 1\n")
    include(l2, *(f'#include "../{name}"' for name in NAMES))
    assert build(l2).compiled == [K1]
    for name in NAMES:
        edit(l2 / "kernels" / name)
        result = build(l2)
        assert result.compiled == [K1], name
        assert reasons(result)[K1] == f"header kernels/{name} changed"


def test_a_header_name_a_depfile_cannot_hold_fails_the_unit(l2):
    """A name ending in a backslash reads back as another (missing) file: refused, never tracked wrongly."""
    (l2 / "kernels/trailing\\").write_text("#define TRAILING 1\n")
    include(l2, '#include "../trailing\\"')
    result = build(l2, check=False)
    failure, = result.failures
    assert failure.task == K1
    assert "does not exist after the compile" in failure.headline and "trailing" in failure.headline
    assert not (l2 / host_binary(K1_SRC)).exists()


@pytest.mark.parametrize("way", ["pragma system_header", "-isystem of CXXFLAGS", "name with a colon"])
def test_an_outside_header_is_refused_whichever_way_it_comes_in(l2, tmp_path, monkeypatch, way):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "out:side.h").write_text("#define OUTSIDE_HEADER 1\n")
    line = f'#include "{outside}/out:side.h"\n'
    if way == "pragma system_header":
        (l2 / "kernels/vendor.h").write_text("#pragma GCC system_header\n" + line)
        include(l2, '#include "../vendor.h"')
    elif way == "-isystem of CXXFLAGS":
        sysinc = tmp_path / "sysinc"
        sysinc.mkdir()
        (sysinc / "site.h").write_text(line)
        include(l2, "#include <site.h>")
        monkeypatch.setenv("CXXFLAGS", f"-isystem {sysinc}")
    else:
        include(l2, line.strip())
    result = build(l2, check=False, keep_going=True)
    failure, = result.failures
    assert failure.task == K1 and ESCAPE in failure.headline and "out:side.h" in failure.headline
    assert not (l2 / host_binary(K1_SRC)).exists()
    assert not (l2 / HOST_STAMP).exists()


# PTO-ISA: its identity is HEAD of a clean checkout; git-ignored files are not part of it.

@pytest.fixture
def pto_isa_ignored(pto_isa):
    """The stand-in checkout, with `pto-inst.hpp` including a git-ignored generated header."""
    inc = pto_isa / "include" / "pto"
    (inc / "pto-inst.hpp").write_text('#pragma once\n#include "generated.hpp"\nnamespace pto {}\n')
    (inc / "generated.hpp").write_text("#define PTO_GENERATED 1\n")
    (pto_isa / ".gitignore").write_text("generated.hpp\n")
    git(pto_isa, "add", ".")
    git(pto_isa, "commit", "-qm", "generated header")
    assert clean_git_revision(pto_isa).value is not None
    return pto_isa


@pytest.mark.slow
def test_pto_isa_headers_git_ignores_are_tracked_per_unit(l2, pto_isa_ignored, monkeypatch):
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa_ignored))
    assert len(build(l2).compiled) == 4
    generated = pto_isa_ignored / "include/pto/generated.hpp"
    edit(generated)
    assert clean_git_revision(pto_isa_ignored).value is not None, "git does not see the edit"
    result = build(l2)
    assert result.compiled == KERNELS
    assert set(reasons(result).values()) == {f"header {generated} changed"}
    assert build(l2).compiled == []


@pytest.mark.slow
def test_tracked_pto_isa_headers_stay_covered_by_the_revision(l2, pto_isa_ignored, monkeypatch):
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa_ignored))
    build(l2)
    from pypto_build.compile import header_sets
    headers = header_sets.read(values_of(l2, K1)["outside"], HOST, l2)
    assert str(pto_isa_ignored / "include/pto/generated.hpp") in headers
    assert not any(h.endswith("pto-inst.hpp") for h in headers), "git's revision covers it"


@pytest.mark.parametrize("bit", ["--assume-unchanged", "--skip-worktree"])
def test_git_bits_that_hide_edits_from_status_make_the_pto_isa_identity_unknown(pto_isa, bit):  # noqa: F811
    git(pto_isa, "update-index", bit, "include/pto/pto-inst.hpp")
    (pto_isa / "include/pto/pto-inst.hpp").write_text("#pragma once\nnamespace pto { int edited; }\n")
    assert subprocess.run(["git", "status", "--porcelain"], cwd=pto_isa, capture_output=True,
                          text=True).stdout == "", "git status does not see the edit"
    rev = clean_git_revision(pto_isa)
    assert rev.value is None and "include/pto/pto-inst.hpp" in rev.why_unknown


@pytest.mark.slow
def test_a_header_edited_while_its_includer_compiles_is_rebuilt_next_run(l2, tmp_path, monkeypatch):
    """The digest taken after a compile may not be what the compiler read: no digest when the header's ctime
    says it changed since the compile started (the doit #119 race, for headers)."""
    header, flag = l2 / "kernels/common.h", tmp_path / "edited-once"
    wrapper = tmp_path / "editing-g++"
    wrapper.write_text('#!/bin/sh\ng++ "$@"; rc=$?\n'
                       f'case "$*" in *main_incore_0_aic*) [ -e {flag} ] || '
                       f'{{ touch {flag}; echo "// edited" >> {header}; }};; esac\nexit $rc\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    assert len(build(l2).compiled) == 4 and flag.exists()
    result = build(l2)
    assert "compile:aic/main_incore_0_aic" in result.compiled
    assert set(reasons(result).values()) == {"header kernels/common.h changed"}
    assert build(l2).compiled == []


def test_states_recorded_without_system_headers_rebuild_once(l2):
    """A directory built by an older pypto_build (-MMD: no system headers) is not trusted to be complete."""
    from pypto_build.engine.statedb import open_state
    dep = open_state(l2 / HOST / STATE_DB, adopt=False)
    values = dict(dep.get_values(K1))
    dep.backend.set(K1, "_values_:", {k: v for k, v in values.items() if k != "tracking"})
    dep.close()
    result = build(l2)
    assert result.compiled == [K1]
    assert reasons(result)[K1] == "headers recorded by an older pypto_build (system headers left out)"
    assert build(l2).compiled == []


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["removed", "garbled", "another set's"])
def test_a_missing_or_damaged_record_of_outside_headers_rebuilds_its_units(l2, damage):
    from pypto_build.compile import header_sets
    name = values_of(l2, K1)["outside"]
    record = l2 / header_sets.sets_dir(HOST) / f"{name}.json"
    orch = l2 / header_sets.sets_dir(HOST) / f"{values_of(l2, 'orch:main')['outside']}.json"
    if damage == "removed":
        record.unlink()
    elif damage == "garbled":
        record.write_text(record.read_text()[:-20])
    else:
        record.write_bytes(orch.read_bytes())                # valid, but not the set its name says
    result = build(l2)
    assert result.compiled == KERNELS
    assert set(reasons(result).values()) == {f"{header_sets.sets_dir(HOST)}/{name}.json (states of headers outside "
                                             "the build directory) missing or damaged"}
    assert header_sets.read(name, HOST, l2) is not None, "rewritten by the compiles"
    assert build(l2).compiled == []


def test_a_compiler_that_cannot_list_its_include_dirs_is_one_line(l2, tmp_path):
    """The compiler's own search directories are include roots: not knowing them is bad environment (exit 2)."""
    fake = tmp_path / "odd-cxx"
    fake.write_text('#!/bin/sh\ncase "$1" in --version) echo "odd 1.0";; *) echo "odd: what is -E?" >&2; exit 1;; '
                    "esac\n")
    fake.chmod(0o755)
    out = subprocess.run(["pypto-build", "build", str(l2)], capture_output=True, text=True,
                         env={**os.environ, "CXX": str(fake)})
    assert out.returncode == 2, out.stderr
    line, = out.stderr.splitlines()
    assert str(fake) in line and "exit status 1 when asked for its include directories (-x c++ -E -v): odd: what " \
        "is -E?; fix $CXX" in line
    assert "Traceback" not in out.stdout
