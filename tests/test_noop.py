"""The no-op fast path: nothing loaded when nothing changed, and never wrong when something did."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS, age_tree, edit, git, recording_git, settle_ctimes, which
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.platforms.host.places import host_binary

FAST = "no-op record"


def settle(root: Path) -> None:
    """Age every file past the racy window, then let one run record the no-op summary."""
    age_tree(root, 3600)
    build(root)
    assert (root / ".pypto_build/noop.marshal").exists()


def is_fast(result) -> bool:
    return bool(result.units) and all(u.reason == FAST for u in result.units)


@pytest.fixture
def settled(l2) -> Path:
    settle(l2)
    return l2


def test_noop_answers_from_stats_without_loading_doit(settled):
    code = ("import sys; from pypto_build.cli.main import main; rc = main(['build', %r]); "
            "print(sorted(m for m in ('doit', 'torch', 'sqlite3') if m in sys.modules)); sys.exit(rc)" % str(settled))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    header, *rest = out.stdout.splitlines()
    assert header.startswith("pypto-build: platform host (") and rest == ["pypto-build: 0 compiled, 4 up to date", "[]"]
    assert is_fast(build(settled))


def test_a_fresh_build_records_nothing_until_files_are_old(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    build(root)
    assert not (root / ".pypto_build/noop.marshal").exists()       # outputs younger than 2 s: racy


@pytest.mark.slow
@pytest.mark.parametrize("change", ["edit kernel", "edit header", "delete output", "flags", "new pto",
                                    "kernel_config", "doit forget"])
def test_any_change_takes_the_full_path(settled, monkeypatch, change):
    if change == "edit kernel":
        edit(synth.kernel_path(settled, 1))
        expect = ["compile:aiv/main_incore_1_aiv"]
    elif change == "edit header":
        edit(settled / "kernels/common.h")
        expect = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic"]
    elif change == "delete output":
        (settled / host_binary("orchestration/main.cpp")).unlink()
        expect = ["orch:main"]
    elif change == "flags":
        monkeypatch.setenv("CXXFLAGS", "-DX=1")
        expect = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic",
                  "compile:aiv/main_incore_1_aiv", "orch:main"]
    elif change == "new pto":
        (settled / "ptoas").mkdir()
        (settled / "ptoas/extra.pto").write_text("// a new unit\n")
        result = build(settled, check=False)          # no ptoas to make its raw output: not applied, a failure
        assert not is_fast(result) and result.names("failed") == ["ptoas:extra"]
        return
    elif change == "kernel_config":
        cfg = settled / "kernel_config.py"
        cfg.write_text(cfg.read_text().replace('"aicpu_thread_num": 0', '"aicpu_thread_num": 4'))
        expect = []
    else:
        out = subprocess.run(["pypto-build", "doit", "forget", str(settled), "orch:main"], capture_output=True)
        assert out.returncode == 0
        assert not (settled / ".pypto_build/noop.marshal").exists()
        expect = ["orch:main"]
    result = build(settled)
    assert not is_fast(result)
    assert result.compiled == expect


@pytest.fixture
def git_calls(tmp_path, monkeypatch) -> Path:
    """The log of a stand-in `git` first on PATH (`recording_git`)."""
    log = recording_git(tmp_path / "git-stand-in")
    monkeypatch.setenv("PATH", f"{log.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def test_a_clean_pto_isa_checkout_is_judged_without_git_and_an_edit_still_seen(l2, pto_isa, git_calls, monkeypatch):
    """PTO_ISA_ROOT's identity is HEAD of a clean checkout: the record watches the checkout (git_watch), so a
    no-op runs no git; a same-size edit of a tracked file with its mtime put back goes to git, which sees it."""
    (pto_isa / "NOTES").write_text("one\n")
    git(pto_isa, "add", ".")
    git(pto_isa, "commit", "-qm", "notes")
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa))
    build(l2)                               # compiles against PTO_ISA_ROOT
    age_tree(pto_isa)
    git(pto_isa, "status")                  # git refreshes its index once for the aged files
    settle(l2)
    git_calls.write_text("")
    assert is_fast(build(l2))
    assert git_calls.read_text() == ""

    notes = pto_isa / "NOTES"
    time.sleep(1 - time.time() % 1 + 0.01)  # past git's last look: it compares ctime in whole seconds
    before = notes.stat()
    notes.write_text("two\n")
    os.utime(notes, ns=(before.st_atime_ns, before.st_mtime_ns))
    result = build(l2)
    assert not is_fast(result) and "status" in git_calls.read_text()
    assert len(result.compiled) == 4         # the identity is unknown: every unit rebuilds, nothing stamped
    assert any("uncommitted or untracked changes" in w for w in result.warnings)


def test_pto_isa_root_pointed_at_another_checkout_takes_the_full_path(l2, pto_isa, tmp_path, monkeypatch):
    """PTO_ISA_ROOT through a symbolic link: the record names the checkout it resolved to."""
    other = tmp_path / "other-pto-isa"
    git(tmp_path, "clone", "-q", str(pto_isa), str(other))
    (other / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\nnamespace pto { }\n")
    git(other, "commit", "-qam", "other")
    link = tmp_path / "pto-link"
    link.symlink_to(pto_isa)
    monkeypatch.setenv("PTO_ISA_ROOT", str(link))
    build(l2)
    for tree in (pto_isa, other):
        age_tree(tree)
        git(tree, "status")
    settle(l2)
    assert is_fast(build(l2))
    link.unlink()
    link.symlink_to(other)
    result = build(l2)
    assert not is_fast(result) and len(result.compiled) == 4


def test_selected_tasks_and_recompile_bypass_the_record(settled):
    assert not is_fast(build(settled, tasks=["orch:main"]))
    settle(settled)
    result = build(settled, recompile=True)
    assert len(result.compiled) == 4
    assert not (settled / ".pypto_build/noop.marshal").exists()      # fresh outputs: nothing recorded yet


# The fast path never disagrees with `explain`: every input of the decision is looked up the same way.

UNITS = ("ptoas:", "compile:", "orch:")


def script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return path


def cli(*args: str) -> str:
    out = subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def would_run(root: Path) -> set[str]:
    return {line.split(": ", 1)[0] for line in cli("explain", str(root)).splitlines() if line.startswith(UNITS)}


def ran(root: Path) -> tuple[set[str], bool]:
    """`pypto-build build`: the units it ran, and whether it answered from the no-op record (doit never loaded)."""
    code = ("import sys; from pypto_build.cli.main import main; rc = main(['build', %r]); "
            "print('doit loaded:', 'doit' in sys.modules); sys.exit(rc)" % str(root))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    ptoas = {f"ptoas:{Path(line.split()[3]).stem}" for line in lines if line.startswith("[pto->cpp] regenerating ")}
    ptoas |= {f"ptoas:{Path(line.split()[2].rstrip(':')).stem}" for line in lines
              if line.startswith("[pto->cpp] checked ")}
    return ptoas | {line.split()[0] for line in lines if line.startswith(UNITS)}, "doit loaded: False" in lines


CHANGES = ["nothing", "g++ link on PATH retargeted", "g++ behind a wrapper retargeted", "wrapper edited",
           "ptoas replaced in place", "ptoas link retargeted", "PTOAS_ROOT moved"]


@pytest.mark.slow
@pytest.mark.parametrize("change", CHANGES)
def test_the_fast_path_says_nothing_to_do_only_when_explain_does(tmp_path, monkeypatch, change):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_gxx = which("g++")
    (bin_dir / "g++").symlink_to(real_gxx)
    other = script(tmp_path / "other-g++", 'case "$1" in --version) echo "g++ (other) 99.1"; exit 0;; esac\n'
                                           f'exec {real_gxx} "$@"\n')
    wrapper = script(tmp_path / "cxx-wrap", 'exec g++ "$@"\n')
    ptoas_a, ptoas_b = tmp_path / "ptoas-a", tmp_path / "ptoas-b"
    for exe in (ptoas_a, ptoas_b):
        shutil.copy(FAKE_PTOAS, exe)
    edit(ptoas_b, "# another build of ptoas\n")
    ptoas_root = tmp_path / "ptoas-root"
    ptoas_root.mkdir()
    (ptoas_root / "ptoas").symlink_to(ptoas_a)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PTOAS_ROOT", str(ptoas_root))
    if change in ("g++ behind a wrapper retargeted", "wrapper edited"):
        monkeypatch.setenv("CXX", str(wrapper))
    root = synth.write_l2(tmp_path / "d", kernels=2, pto=True)
    assert "ptoas:main_group" in ran(root)[0]        # first sight: ptoas checks each unit, its identity recorded
    age_tree(root)
    assert ran(root) == (set(), False) and (root / ".pypto_build/noop.marshal").exists()

    if change == "g++ link on PATH retargeted":
        (bin_dir / "g++").unlink()
        (bin_dir / "g++").symlink_to(other)
    elif change == "g++ behind a wrapper retargeted":     # the wrapper file itself is unchanged
        (bin_dir / "g++").unlink()
        (bin_dir / "g++").symlink_to(other)
    elif change == "wrapper edited":
        edit(wrapper, "# edited\n")
    elif change == "ptoas replaced in place":
        edit(ptoas_a, "# rebuilt\n")
    elif change == "ptoas link retargeted":
        (ptoas_root / "ptoas").unlink()
        (ptoas_root / "ptoas").symlink_to(ptoas_b)
    elif change == "PTOAS_ROOT moved":
        moved = tmp_path / "ptoas-root-2"
        moved.mkdir()
        shutil.copy(ptoas_b, moved / "ptoas")
        monkeypatch.setenv("PTOAS_ROOT", str(moved))

    would = would_run(root)                       # explain first: it writes nothing
    units, fast = ran(root)
    assert units == would, "the build does what explain says"
    assert not (fast and would), f"the fast path skipped {sorted(would)}"
    assert bool(would) == (change != "nothing")
    assert fast == (change == "nothing")


def test_a_header_dated_in_the_future_rebuilds_its_includers_once(settled):
    header = settled / "kernels/common.h"
    edit(header)
    future = time.time() + 86400
    os.utime(header, (future, future))
    includers = ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic"]
    assert build(settled).compiled == includers
    assert build(settled).compiled == []                # not again, and not on every run
    settle_ctimes()
    build(settled)                                      # the full path records the no-op summary...
    assert (settled / ".pypto_build/noop.marshal").exists()
    assert is_fast(build(settled))                      # ...and the fast path answers the next run


def test_a_header_outside_the_directory_is_in_the_record(l2, tmp_path, monkeypatch):
    """Headers outside the build dir (here under an -isystem dir of CXXFLAGS) defeat the fast path when edited."""
    sysinc = tmp_path / "sysinc"
    sysinc.mkdir()
    (sysinc / "site.h").write_text("#define SITE 1\n")
    src = synth.kernel_path(l2, 1)
    src.write_text(src.read_text().replace('#include "tensor.h"', '#include "tensor.h"\n#include <site.h>', 1))
    monkeypatch.setenv("CXXFLAGS", f"-isystem {sysinc}")
    assert len(build(l2).compiled) == 4
    settle(l2)
    assert is_fast(build(l2))
    edit(sysinc / "site.h")
    result = build(l2)
    assert not is_fast(result) and result.compiled == ["compile:aiv/main_incore_1_aiv"]


def test_a_result_the_record_answered_hands_the_run_its_programs(tmp_path):
    """Issue 34 item 7: the no-op record keeps the plan's programs (directory, layout kind, platform), so a
    `BuildResult` always carries them — the run stage never classifies the directory again."""
    from pypto_build.builddir.layout import BuildKind
    from pypto_build.plan.program import Program

    root = synth.write_multi_orch(tmp_path / "m", kernels=1, golden=True)
    (root / "next_levels/orch_b/golden.py").unlink()               # a sub-build without golden.py does not run
    build(root)
    planned = build(root, tasks=["stamp"])                          # the full path (tasks bypass the record)
    settle(root)
    answered = build(root)
    assert is_fast(answered) and not is_fast(planned)
    assert answered.programs == planned.programs == (Program(root / "next_levels/orch_a", BuildKind.L2, "host"),)
    with pytest.raises(Exception, match="multi-orchestration parent; run one of its sub-builds"):
        answered.program()


@pytest.mark.parametrize("kind", ["l2", "l3", "l2_recording_a_simulator"])
def test_the_programs_the_record_hands_over_are_the_plans(tmp_path, kind):
    """The no-op record's programs are exactly what the full path plans (directory, layout kind, platform), for an
    L2 and an L3 directory and for one recording a simulator that falls back to the host runtime here."""
    import json
    from pypto_build.platforms import cannot_serve

    if kind == "l3":
        root = synth.write_l3(tmp_path / "d")
    else:
        root = synth.write_l2(tmp_path / "d", kernels=1, golden=True)
    if kind == "l2_recording_a_simulator":
        if cannot_serve("a2a3sim") is None:
            pytest.skip("simpler is importable here: a2a3sim does not fall back")
        meta = json.loads((root / "compiled_meta.json").read_text())
        (root / "compiled_meta.json").write_text(json.dumps({**meta, "platform": "a2a3sim"}))
    build(root)
    planned = build(root, tasks=["stamp"])                          # the full path (tasks bypass the record)
    settle(root)
    answered = build(root)
    assert is_fast(answered) and not is_fast(planned)
    assert answered.programs == planned.programs and answered.platform == planned.platform == "host"
    assert answered.program() == planned.program()
    assert answered.program().path == root
