"""The command line, `python -m`, the `doit pypto-build` plugin and doit's own commands on a graph."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import edit
from pypto_build.platforms.host.places import host_binary
from pypto_build.testing import synth


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def test_help_is_useful():
    out = run("pypto-build", "--help")
    assert out.returncode == 0
    for word in ("build", "doit", "CXXFLAGS", "--recompile"):
        assert word in out.stdout or word in run("pypto-build", "build", "--help").stdout


def test_leaving_without_teardown_keeps_output_status_and_profiles(l2, tmp_path):
    """cli.entry leaves with os._exit: output piped to a file is whole, statuses are kept (bad input 2,
    a failed unit 1), and a profiler still writes what it collected."""
    edit(synth.kernel_path(l2, 0))
    log = tmp_path / "out.txt"
    with open(log, "w") as handle:
        code = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(l2)], stdout=handle,
                              timeout=300).returncode
    last = log.read_text().strip().splitlines()[-1]             # (a comment: the same bytes, kept and said)
    assert code == 0 and last.startswith("pypto-build: 1 compiled, 3 up to date, 1 stamp(s) written")
    assert run("pypto-build", "build", str(tmp_path / "missing")).returncode == 2
    synth.kernel_path(l2, 1).write_text("not C++\n")
    failed = run("pypto-build", "build", "-q", str(l2))
    assert failed.returncode == 1 and "FAILED compile:aiv/main_incore_1_aiv" in failed.stderr
    prof = tmp_path / "build.prof"
    out = run(sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "pypto_build", "build", "-q", str(l2))
    assert "FAILED compile:aiv/main_incore_1_aiv" in out.stderr and prof.stat().st_size > 0  # (cProfile exits 0)


@pytest.mark.slow
def test_python_m_build_then_noop(l2):
    edit(synth.kernel_path(l2, 0))
    out = run(sys.executable, "-m", "pypto_build", "build", str(l2))
    assert out.returncode == 0, out.stderr
    assert "compile:aic/main_incore_0_aic" in out.stdout
    assert out.stdout.strip().splitlines()[-1].startswith("pypto-build: 1 compiled, 3 up to date, 1 stamp(s) written")
    again = run("pypto-build", "build", str(l2))
    header, *rest = again.stdout.strip().splitlines()
    assert rest == ["pypto-build: 0 compiled, 4 up to date"]
    assert header.startswith("pypto-build: platform host (") and header == out.stdout.splitlines()[0]


def test_bad_directory_is_one_line_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    out = run("pypto-build", "build", str(tmp_path / "empty"))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "not a build_output directory" in out.stderr and str(tmp_path / "empty") in out.stderr
    assert list((tmp_path / "empty").iterdir()) == [], "nothing written into a non-build directory"


def test_compile_failure_exit_1_with_compiler_message(l2):
    edit(synth.kernel_path(l2, 1), "\nsyntax error here\n")
    out = run("pypto-build", "build", str(l2))
    assert out.returncode == 1
    assert "FAILED compile:aiv/main_incore_1_aiv" in out.stderr and "error:" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_doit_build_plugin_runs_inside_a_build_dir_without_dodo(l2):
    assert not (l2 / "dodo.py").exists()
    edit(synth.kernel_path(l2, 2))
    out = run("doit", "pypto-build", cwd=l2)
    assert out.returncode == 0, out.stderr
    assert "compile:aic/main_incore_2_aic" in out.stdout
    assert "0 compiled, 4 up to date" in run("doit", "pypto-build", cwd=l2).stdout


@pytest.mark.slow
def test_doit_list_info_forget_clean_on_the_graph(l2):
    out = run("pypto-build", "doit", "list", str(l2), "--all", "--status")
    assert out.returncode == 0, out.stderr
    assert "U compile:aic/main_incore_0_aic" in out.stdout
    edit(l2 / "kernels" / "common.h")
    info = run("pypto-build", "doit", "info", str(l2), "compile:aic/main_incore_0_aic")
    assert info.returncode == 1                                   # doit: not up to date
    assert "header kernels/common.h changed" in info.stdout
    forget = run("pypto-build", "doit", "forget", str(l2), "compile:aiv/main_incore_1_aiv")
    assert forget.returncode == 0, forget.stderr
    out = run("pypto-build", "build", str(l2))
    assert "compile:aiv/main_incore_1_aiv  (never built)" in out.stdout
    clean = run("pypto-build", "doit", "clean", str(l2), "compile:aiv/main_incore_1_aiv")
    assert clean.returncode == 0, clean.stderr
    assert (l2 / host_binary("kernels/aic/main_incore_0_aic.cpp")).exists()      # only the named task's target
    assert not (l2 / host_binary("kernels/aiv/main_incore_1_aiv.cpp")).exists()
    assert (l2 / "kernels/aiv/main_incore_1_aiv.cpp").exists()


@pytest.mark.slow
def test_example_command_replays_validates_and_shows_one_incremental_rebuild(tmp_path):
    dest = tmp_path / "ex"
    out = run("pypto-build", "example", str(dest))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("Golden validation: PASSED") == 2
    second = out.stdout.split("now editing")[1]
    assert "compile:aiv/matmul_relu_incore_1_aiv" in second
    assert "compile:aic/" not in second and "1 compiled, 2 up to date" in second
    again = run("pypto-build", "example", str(dest))                 # an existing copy is kept and replayed
    assert again.returncode == 0 and "0 compiled" in again.stdout and "copied" not in again.stdout


def test_cli_reference_in_docs_matches_the_parser():
    from pypto_build.cli.main import reference
    committed = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == reference(), "regenerate docs/cli.md (command at its top)"


@pytest.mark.slow
def test_example_l3_replays_two_ranks_and_rebuilds_one_kernel(tmp_path):
    dest = tmp_path / "ex3"
    out = run("pypto-build", "example", "--l3", str(dest))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("Golden validation: PASSED") == 2 and "2 rank(s)" in out.stdout
    second = out.stdout.split("now editing")[1]
    assert "compile:chip_b/aiv/chip_b_incore_1_aiv" in second and "1 compiled, 5 up to date" in second


def test_summary_says_what_was_skipped_and_why(l2):
    edit(synth.kernel_path(l2, 1), "\nnot C++\n")
    out = run("pypto-build", "build", "-k", str(l2))
    assert out.returncode == 1
    assert "skipped stamp:.: a unit it depends on failed" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date, 1 failed, 1 skipped"
