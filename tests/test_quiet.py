"""`-q` prints only errors, the verdict and any `.pto` edit not applied (issue 22 item 7).

The program runs in a child process, so `-q` has to reach it: its progress (`golden: cached ...`,
`[execute] ...`, `Replay finished ...`) is not printed, its verdict is. An edit that did not reach
the kernels (`--allow-unapplied-pto`) is said with `-q` too, before the verdict: a PASSED run never
hides that it ran without it.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import copy_dir
from pypto_build.compat.runner import write_run_script
from pypto_build.run import KEPT_VERDICT
from pypto_build.testing import synth

pytestmark = pytest.mark.slow

CACHED = f"validate:.  Golden validation: PASSED {KEPT_VERDICT}"
NOT_APPLIED = ("[pto->cpp] edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): "
               "ptoas/main_incore_2_aic.pto")


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def said(out: subprocess.CompletedProcess) -> list[str]:
    assert out.stderr == "", out.stderr
    return out.stdout.splitlines()


def test_quiet_runs_say_only_their_verdict(built_golden, tmp_path):
    root = copy_dir(built_golden, tmp_path / "g")
    replay = cli("replay", "-q", str(root))
    assert replay.returncode == 0 and said(replay) == []
    fresh = cli("validate", "-q", str(root))
    assert fresh.returncode == 0 and said(fresh) == ["Golden validation: PASSED"]
    kept = cli("validate", "-q", str(root))                    # the verdict holds: said from the record
    assert kept.returncode == 0 and said(kept) == [CACHED]
    again = cli("replay", "--validate", "-q", str(root))       # golden.py's result cached: not said either
    assert again.returncode == 0 and said(again) == ["Golden validation: PASSED"]
    loud = cli("replay", "--validate", str(root))               # without -q: all of it
    assert loud.returncode == 0
    assert any(line.startswith("golden: cached") for line in said(loud))
    assert any(line.startswith("[execute] running on the host runtime") for line in said(loud))
    assert any(line.startswith("Replay finished.") for line in said(loud))


def test_quiet_never_hides_a_pto_edit_that_was_not_applied(tmp_path):
    empty = tmp_path / "no-ptoas"
    empty.mkdir()
    env = {"PTOAS_ROOT": str(empty)}
    root = synth.write_l2(tmp_path / "p", kernels=3, pto=True, golden=True)
    assert cli("validate", "-q", str(root), env=env).returncode == 0
    pto = synth.pto_path(root, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace("synth_scale(a[i], 3.0f)", "synth_scale(a[i], 5.0f)"))
    build = cli("build", "-q", "--allow-unapplied-pto", str(root), env=env)
    assert build.returncode == 0 and said(build) == [NOT_APPLIED]
    validate = cli("validate", "-q", "--allow-unapplied-pto", str(root), env=env)
    assert validate.returncode == 0 and said(validate) == [NOT_APPLIED, CACHED]
    fresh = cli("replay", "--validate", "-q", "--allow-unapplied-pto", str(root), env=env)
    assert fresh.returncode == 0 and said(fresh) == [NOT_APPLIED, "Golden validation: PASSED"]
    ci = cli("ci", "-q", "--allow-unapplied-pto", str(root), env=env)
    assert ci.returncode == 0 and said(ci) == [
        f"pypto-build ci: ok validate {root} (verdict reused); .pto edits NOT applied: ptoas/main_incore_2_aic.pto",
        "pypto-build ci: 1 ok, 0 failed"]
    refused = cli("validate", "-q", str(root), env=env)        # not accepted: the error, and no verdict
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("pypto-build: FAILED ptoas:main_incore_2_aic: ptoas/main_incore_2_aic.pto: "
                                     "edited, but ptoas not found")


def test_quiet_reaches_the_program_of_debug_run_py(built_golden, tmp_path):
    root = copy_dir(built_golden, tmp_path / "g")
    (root / "golden.py").unlink()                              # debug/run.py's own inline inputs
    path = write_run_script(root)
    text = path.read_text()
    stub = "    return  # TODO: add your comparison here"
    path.write_text(text.replace(stub, "    print('USER_COMPARE', tuple(out.shape))"))
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_EMIT_DEBUG_RUNNER"}
    run = subprocess.run([sys.executable, str(path), "-q"], capture_output=True, text=True, cwd="/", env=env,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == ["USER_COMPARE (16,)"] and run.stderr == ""
