"""The no-op fast path: nothing loaded when nothing changed, and never wrong when something did."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import age_tree, edit
from pypto_build import synth
from pypto_build.api import build

FAST = "no-op record"


def settle(root: Path) -> None:
    """Age every file past the racy window, then let one run record the no-op summary."""
    age_tree(root, 3600)
    build(root)
    assert (root / ".pypto_build/noop.json").exists()


def is_fast(result) -> bool:
    return bool(result.units) and all(u.reason == FAST for u in result.units)


@pytest.fixture
def settled(l2) -> Path:
    settle(l2)
    return l2


def test_noop_answers_from_stats_without_loading_doit(settled):
    code = ("import sys; from pypto_build.cli import main; rc = main(['build', %r]); "
            "print(sorted(m for m in ('doit', 'torch', 'sqlite3') if m in sys.modules)); sys.exit(rc)" % str(settled))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["pypto-build: 0 compiled, 4 up to date", "[]"]
    assert is_fast(build(settled))


def test_a_fresh_build_records_nothing_until_files_are_old(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    build(root)
    assert not (root / ".pypto_build/noop.json").exists()       # outputs younger than 2 s: racy


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
        (settled / "orchestration/main.so").unlink()
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
        assert not (settled / ".pypto_build/noop.json").exists()
        expect = ["orch:main"]
    result = build(settled)
    assert not is_fast(result)
    assert result.compiled == expect


def test_pto_isa_root_never_uses_the_record(settled, tmp_path, monkeypatch):
    from pypto_build import noop
    monkeypatch.setenv("PTO_ISA_ROOT", str(tmp_path))
    assert noop.key("host", True, None) is None
    monkeypatch.delenv("PTO_ISA_ROOT")
    assert noop.key("host", True, None) is not None


def test_selected_tasks_and_recompile_bypass_the_record(settled):
    assert not is_fast(build(settled, tasks=["orch:main"]))
    settle(settled)
    result = build(settled, recompile=True)
    assert len(result.compiled) == 4
    assert not (settled / ".pypto_build/noop.json").exists()      # fresh outputs: nothing recorded yet
