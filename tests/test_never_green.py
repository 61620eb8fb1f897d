"""Nothing is falsely green: a validation passes only when a comparison ran and passed (issue 11, 5 and 7).

Every case is a real directory run through the real CLI (or the API): golden.py and
the program run in a child process, so an `exit` anywhere, a golden.py that computes
nothing, outputs that name inputs and meaningless tolerances all fail, in one line.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import HOST_STATE_DB, copy_dir, inject, settle_ctimes
from pypto_build.testing import synth
from pypto_build.api import validate
from pypto_build.errors import BuildError

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

COMPUTE = '    tensors["out"][:] = out'


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def edit_golden(root: Path, old: str, new: str) -> None:
    path = root / "golden.py"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def one_failure(out: subprocess.CompletedProcess, pattern: str) -> None:
    """Non-zero, exactly one stderr line naming the failure, no traceback, no PASSED anywhere."""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert len(lines) == 1 and lines[0].startswith("pypto-build: FAILED validate:."), out.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in out.stderr + out.stdout and "PASSED" not in out.stdout


GOLDEN_CASES = {
    "sys.exit(0) in golden.py": (("import torch\n", "import sys, torch\nsys.exit(0)\n"),
                                 r"sys\.exit\(0\) was called while loading golden\.py"),
    "os._exit(0) in golden.py": (("import torch\n", "import os, torch\nos._exit(0)\n"),
                                 r"exited with status 0 .* while loading golden\.py"),
    "sys.exit(0) in compute_golden": ((COMPUTE, "    import sys; sys.exit(0)"),
                                      r"sys\.exit\(0\) was called while calling golden\.py compute_golden"),
    "compute_golden does nothing": ((COMPUTE, "    pass"), r"compute_golden\(\) left output 'out' exactly as"),
    "compute_golden rebinds its output": ((COMPUTE, '    tensors["out"] = out'),
                                          r"compute_golden\(\) replaced tensors\['out'\]"),
    "__outputs__ names an input": (("__outputs__ = ['out']", "__outputs__ = ['a']"),
                                   r"__outputs__ names 'a', which compiled_meta\.json declares as an input"),
    "__outputs__ names a missing tensor": (("__outputs__ = ['out']", "__outputs__ = ['ghost']"),
                                           r"__outputs__ names 'ghost', which generate_inputs\(\) does not return"),
    "__outputs__ is empty": (("__outputs__ = ['out']", "__outputs__ = []"), r"__outputs__ is empty.*compare nothing"),
    "__outputs__ is a string": (("__outputs__ = ['out']", "__outputs__ = 'out'"), r"__outputs__ is 'out'"),
    "NaN RTOL": (("RTOL = 1e-05", "RTOL = float('nan')"), r"RTOL = nan is not a tolerance"),
    "negative ATOL": (("ATOL = 1e-05", "ATOL = -0.1"), r"ATOL = -0\.1 is not a tolerance"),
    "non-numeric ATOL": (("ATOL = 1e-05", "ATOL = '1e-5'"), r"ATOL = '1e-5' is not a tolerance"),
    "boolean RTOL": (("RTOL = 1e-05", "RTOL = True"), r"RTOL = True is not a tolerance"),
    "infinite ATOL": (("ATOL = 1e-05", "ATOL = float('inf')"), r"infinite tolerance .* nothing was compared"),
}


@pytest.mark.parametrize("case", list(GOLDEN_CASES))
def test_a_golden_that_proves_nothing_fails_validate(g, case):
    (old, new), pattern = GOLDEN_CASES[case]
    edit_golden(g, old, new)
    one_failure(run("validate", str(g)), pattern)
    assert "verdict" not in validate_values(g)                       # nothing recorded as passed


@pytest.mark.parametrize("case", ["sys.exit(0) in compute_golden", "__outputs__ is empty", "infinite ATOL"])
def test_replay_validate_fails_the_same_way(g, case):
    """replay --validate loads golden.py through the same child process: one exit, one structure
    and one tolerance case stand for the rest."""
    (old, new), pattern = GOLDEN_CASES[case]
    edit_golden(g, old, new)
    one_failure(run("replay", "--validate", str(g)), pattern)
    assert "verdict" not in validate_values(g)


def validate_values(root: Path) -> dict:
    """The values the last successful validation recorded (doit's state, read as doit reads it)."""
    from pypto_build.engine.statedb import open_state
    dep = open_state(root / HOST_STATE_DB, adopt=False)
    try:
        return dict(dep.get_values("validate:.") or {})
    finally:
        dep.backend.discard()


def test_expected_values_come_from_inputs_the_program_never_touched(g):
    # The golden reads `a` AFTER the run would have changed it, if it shared the run's tensors: a kernel
    # that writes its input and a golden that reads it back must not agree by construction.
    inject(synth.kernel_path(g, 0), "for (int64_t i = 0; i < n; ++i) a[i] = 0.0f;", after_call=True)
    edit_golden(g, '    a = tensors["a"]', '    a = tensors["a"]\n    assert float(a.abs().sum()) > 0, "golden saw a zeroed input"')
    out = run("validate", str(g))
    # golden.py sees the untouched inputs (its assert holds); the program computes with a zeroed `a` after
    # kernel 0, so the comparison runs and fails on the numbers.
    one_failure(out, r"Output 'out' does not match golden")


def test_the_api_never_returns_a_passed_validation_that_compared_nothing(g):
    edit_golden(g, "__outputs__ = ['out']", "__outputs__ = []")
    with pytest.raises(BuildError, match="compare nothing"):
        validate(g, progress=None)
    result = validate(g, progress=None, check=False)
    assert not result.ok and result.names("failed") == ["validate:."]


def test_ci_reports_a_golden_that_exits_as_a_failure(g, tmp_path):
    edit_golden(g, "import torch\n", "import sys, torch\nsys.exit(0)\n")
    report = tmp_path / "r.json"
    out = run("ci", "-q", str(g), "--json", str(report))
    assert out.returncode == 1
    data = json.loads(report.read_text())["directories"][0]
    assert not data["ok"] and "sys.exit(0) was called" in data["error"]


# --- item 7: a reused verdict depends on everything golden.py read (issue 25 items 4-6: on everything its
# golden result is keyed on) ------------------------------------------------------------------------------


def test_verdict_is_keyed_on_the_files_and_modules_golden_reads(g, monkeypatch):
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)     # the child writes helpers/__pycache__/, as a user's does
    (g / "scale.txt").write_text("1.0\n")
    helpers = g / "helpers"
    helpers.mkdir()
    (helpers / "refmod.py").write_text("def factor():\n    return 1.0\n")
    edit_golden(g, "import torch\n", "import sys, torch\nfrom pathlib import Path\n"
                "sys.path.insert(0, str(Path(__file__).parent / 'helpers'))\nimport refmod\n")
    edit_golden(g, COMPUTE, '    k = float((Path(__file__).parent / "scale.txt").read_text()) * refmod.factor()\n'
                            '    tensors["out"][:] = out * k')
    settle_ctimes()     # files written within the racy window of the run's start are (rightly) never trusted
    assert validate(g, progress=None).names("ran", "validate:") == ["validate:."]
    index = json.loads((g / ".pypto_build/golden/golden.json").read_text())
    assert validate_values(g)["golden"]["seal"] == index["seal"]           # the verdict names its golden result
    assert set(index["files"]) >= {"scale.txt", "helpers/refmod.py"}, index["files"]     # relative to the sub-build
    assert validate(g, progress=None).names("up-to-date", "validate:") == ["validate:."]
    (g / "scale.txt").write_text("2.0\n")                                # a file beside golden.py
    result = validate(g, progress=None, check=False)
    assert result.names("failed") == ["validate:."]
    assert "golden: scale.txt changed" == next(u.reason for u in result.units if u.task == "validate:.")
    (g / "scale.txt").write_text("1.0\n")
    assert validate(g, progress=None).names("ran", "validate:") == ["validate:."]     # failed last: runs again
    (helpers / "refmod.py").write_text("def factor():\n    return 3.0\n")              # a helper module
    result = validate(g, progress=None, check=False)
    assert result.names("failed") == ["validate:."]
    assert "helpers/refmod.py changed" in next(u.reason for u in result.units if u.task == "validate:.")


# --- issue 25 item 8: an ignored validation is "not validated", never green ------------------------------


def ignore_validation(root: Path) -> None:
    out = subprocess.run(["pypto-build", "doit", "ignore", str(root), "validate:."], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_ignored_validation_is_not_validated(g):
    ignore_validation(g)
    k = synth.kernel_path(g, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))              # a wrong kernel
    for verb in (("validate",), ("replay", "--validate")):
        out = run(*verb, str(g))
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 1, (out.stdout, out.stderr)
        assert lines == ["pypto-build: NOT VALIDATED validate:.: ignored (doit ignore); nothing was compared — "
                         f"`pypto-build doit forget {g} validate:.` makes it run again"], out.stderr
        assert "PASSED" not in out.stdout
    with pytest.raises(BuildError, match="not validated"):
        validate(g, progress=None)
    result = validate(g, progress=None, check=False)
    assert not result.ok and result.not_validated == ["validate:."]
    subprocess.run(["pypto-build", "doit", "forget", str(g), "validate:."], check=True, capture_output=True)
    one_failure(run("validate", str(g)), r"Output 'out' does not match golden")
