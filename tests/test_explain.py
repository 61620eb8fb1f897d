"""`pypto-build explain` and `build --dry-run`: the reason for each kind of staleness, and nothing written."""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from conftest import edit
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.plan.graph import load_graph
from pypto_build.engine.explanation import explain
from pypto_build.platforms.host.places import host_binary

K0, K1 = "compile:aic/main_incore_0_aic", "compile:aiv/main_incore_1_aiv"


def reasons(root: Path) -> dict[str, str]:
    return {e.task: e.reason for e in explain(load_graph(root)) if e.status != "up-to-date"}


def snapshot(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            st = os.stat(p)
            out[p] = (st.st_mtime_ns, st.st_size, hashlib.sha256(Path(p).read_bytes()).hexdigest())
    return out


def test_never_built_creates_nothing(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    before = snapshot(root)
    assert set(reasons(root).values()) == {"never built"}
    assert snapshot(root) == before and not (root / ".pypto_build").exists()


def test_up_to_date_says_nothing_would_run(l2):
    assert reasons(l2) == {}


@pytest.mark.parametrize("kind", ["source", "header", "flags", "compiler", "tampered", "missing", "recompile",
                                  "identity"])
def test_each_kind_of_staleness_and_nothing_written(l2, tmp_path, monkeypatch, kind):
    if kind == "source":
        edit(synth.kernel_path(l2, 1))
        expect = {K1: "changed: kernels/aiv/main_incore_1_aiv.cpp"}
    elif kind == "header":
        edit(l2 / "kernels/common.h")
        expect = {K0: "header kernels/common.h changed"}
    elif kind == "flags":
        monkeypatch.setenv("CXXFLAGS", "-DX=1")
        expect = {K0: "command line changed", "orch:main": "command line changed"}
    elif kind == "compiler":
        wrapper = tmp_path / "cxx"
        wrapper.write_text('#!/bin/sh\nexec g++ "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("CXX", str(wrapper))
        expect = {K1: "compiler changed"}
    elif kind == "tampered":
        so = host_binary("kernels/aiv/main_incore_1_aiv.cpp")
        (l2 / so).write_bytes((l2 / so).read_bytes() + b"x")
        expect = {K1: f"output {so} modified since it was built"}
    elif kind == "missing":
        (l2 / host_binary("orchestration/main.cpp")).unlink()
        expect = {"orch:main": f"output {host_binary('orchestration/main.cpp')} missing"}
    elif kind == "recompile":
        build(l2, recompile=True, tasks=["orch:main"])          # marks every unit, builds only orch:main
        expect = {K1: "forced by --recompile"}
    else:
        repo = tmp_path / "pto-isa"
        (repo / "include").mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        monkeypatch.setenv("PTO_ISA_ROOT", str(repo))
        expect = {K0: "command line changed"}
        got = reasons(l2)
        assert "not a git checkout" not in got[K0]
        assert got["stamp:."].startswith("no stamp: PTO-ISA identity unknown")
    before = snapshot(l2)
    got = reasons(l2)
    for task, reason in expect.items():
        assert got[task] == reason, got
    if kind in ("source", "header", "tampered", "missing"):
        assert got["stamp:."].startswith("after ")
    assert snapshot(l2) == before, "explaining wrote nothing"


def test_pto_edit_explains_ptoas_then_splice(tmp_path):
    root = synth.write_l2(tmp_path / "p", kernels=3, pto=True)
    build(root)
    pto = synth.pto_path(root, "main_incore_2_aic")
    pto.write_text(pto.read_text() + "// edited\n")
    got = reasons(root)
    assert got["ptoas:main_incore_2_aic"] == "changed: ptoas/main_incore_2_aic.pto"
    assert got["splice:main_incore_2_aic"] == "after ptoas:main_incore_2_aic"


def test_cli_explain_and_dry_run(l2):
    edit(synth.kernel_path(l2, 1))
    out = subprocess.run(["pypto-build", "explain", str(l2)], capture_output=True, text=True)
    assert out.returncode == 0 and f"{K1}: changed: kernels/aiv/main_incore_1_aiv.cpp" in out.stdout
    dry = subprocess.run(["pypto-build", "build", "--dry-run", str(l2)], capture_output=True, text=True)
    assert dry.stdout.splitlines()[-1] == "pypto-build: 1 would compile, 3 up to date, also 1 stamp"
    one = subprocess.run(["pypto-build", "explain", str(l2), "orch:main"], capture_output=True, text=True)
    assert one.stdout.splitlines()[0] == "orch:main: up to date"
    assert build(l2).compiled == [K1], "the dry run changed nothing"


@pytest.mark.slow
def test_a_recorded_verdict_says_whether_it_still_holds(built_golden, tmp_path):
    """explain / build --dry-run DIR, no task named: a kept verdict still holding, then why it no longer does."""
    from conftest import copy_dir
    from pypto_build.api import validate
    from test_golden_trust import with_factor

    g = with_factor(copy_dir(built_golden, tmp_path / "g"),
                    "def _factor():\n    return float((Path(__file__).parent / 'data' / 'scale.txt').read_text())\n")
    (g / "data").mkdir(exist_ok=True)
    (g / "data/scale.txt").write_text("1.0\n")
    explained = subprocess.run(["pypto-build", "explain", str(g)], capture_output=True, text=True).stdout
    assert "validate:" not in explained, "never validated: no verdict to speak of"
    validate(g)
    explained = subprocess.run(["pypto-build", "explain", str(g)], capture_output=True, text=True).stdout
    assert "validate:.: the last verdict (PASSED) still holds" in explained.splitlines(), explained
    (g / "data/scale.txt").write_text("1.00\n")
    for verb in (["explain"], ["build", "--dry-run"]):
        out = subprocess.run(["pypto-build", *verb, str(g)], capture_output=True, text=True).stdout.splitlines()
        assert "validate:.: golden: data/scale.txt changed: the last verdict (PASSED) no longer holds" in out, out
        assert out[-1] == "pypto-build: 0 would compile, 4 up to date, 1 verdict(s) no longer hold"


def test_explain_all_on_host_without_pto_isa_says_why_no_kernel_says_how_it_compiled(l2, monkeypatch):
    monkeypatch.delenv("PTO_ISA_ROOT", raising=False)
    out = subprocess.run(["pypto-build", "explain", "--all", str(l2)], capture_output=True, text=True).stdout
    assert out.splitlines()[-2] == (
        "pypto-build: no precompiled preludes on host here, so no kernel says how it last compiled: the host "
        "platform offers them only with PTO_ISA_ROOT set (PTO-ISA's headers) and a GCC kernel compiler"), out
