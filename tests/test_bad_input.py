"""Bad input (issue 7, requirement 3): a corpus of broken build directories.

Every case breaks a fresh `cp -a` copy of a small generated directory, runs the
real CLI on it in a subprocess and checks the contract of bad input:

* a non-zero exit;
* stderr holds exactly one non-empty line, `pypto-build: ...` (progress and
  details such as a compiler's full output go to stdout), and no traceback
  appears anywhere without `--debug`;
* that line names the offending file, says what is wrong and how to fix it
  (every message carries a remedy: `FIX_RE`);
* no file in the directory is created, modified or deleted. Cases refused
  while planning must not touch the state folder `.pypto_build/` either; the
  others (a unit ran and failed) may update it, nothing else.

`python tests/test_bad_input.py` prints each case's message (the corpus table).
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.core.racy import FINE_NS
from pypto_build.platforms.host.places import HOST_OUTPUTS

from bad_input_breaks import NO_RUN_EXTRA, STATE, python_without
from bad_input_corpus import CASES, FIX_RE, NO_SIMPLER, Case

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------


def make_pristine(base: Path) -> dict[str, Path]:
    """The small directories the cases break: L2 (2 kernels, golden.py, ptoas/ stage) and L3, built
    (ptoas is not found, so no wrapper is re-spliced), and an unbuilt multi-orch parent."""
    l2 = synth.write_l2(base / "l2", kernels=2, golden=True, pto=True)
    l3 = synth.write_l3(base / "l3", golden=True)
    for root in (l2, l3):
        build(root)
    return {"l2": l2, "l3": l3, "multi": synth.write_multi_orch(base / "multi", kernels=1, golden=True),
            "no_run_extra": python_without(base / "no-run-extra", *NO_RUN_EXTRA),
            "no_simpler": python_without(base / "no-simpler", *NO_SIMPLER)}


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> dict[str, Path]:
    return make_pristine(tmp_path_factory.mktemp("bad_input_pristine"))


def snapshot(path: Path, *, with_state: bool) -> dict[str, str]:
    """Relative path -> content digest (files), link target (symlinks) or "dir", for everything under `path`
    (without `with_state`, the state folder is left out, but for the host binaries and stamp it holds)."""
    if not os.path.lexists(path):
        return {}
    if not path.is_dir():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}

    def state_only(rel: str) -> bool:
        return not with_state and (rel == STATE or rel.startswith(STATE + "/")) and \
            not (rel == HOST_OUTPUTS or rel.startswith(HOST_OUTPUTS + "/"))

    out: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(path):
        rel_dir = os.path.relpath(dirpath, path)
        for name in dirs:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not state_only(rel):
                out[rel] = "dir"
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if state_only(rel):
                continue
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                out[rel] = "->" + os.readlink(full)
            elif not stat.S_ISREG(mode):            # a FIFO (odd-file cases): never read, it would block
                out[rel] = f"special {stat.S_IFMT(mode):o}"
            else:
                out[rel] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


def cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed `pypto-build` entry point."""
    return subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, errors="replace", timeout=120,
                          env={**os.environ, **(env or {})})


def prepare(case: Case, pristine: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / case.base
    subprocess.run(["cp", "-a", str(pristine[case.base]), str(copy)], check=True)
    target = case.breaks(copy)
    return copy if target is None else target


def run_case(case: Case, target: Path, *, debug: bool = False, pristine: dict | None = None
             ) -> subprocess.CompletedProcess:
    program = [str(pristine[case.python]), "-m", "pypto_build"] if case.python else ["pypto-build"]
    return cli(*program, *(["--debug"] if debug else []), case.verb, *case.args, str(target), env=case.env)


def check_line(case: Case, out: subprocess.CompletedProcess, target: Path) -> str:
    """The one stderr line, checked against the case; returns it."""
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{out.stderr}"
    line = lines[0]
    assert line.startswith("pypto-build: "), line
    assert case.file.replace("{dir}", str(target)) in line, f"does not name {case.file}: {line}"
    assert re.search(case.what, line), f"does not say {case.what!r}: {line}"
    assert FIX_RE.search(line), f"no remedy in: {line}"
    return line


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_clear_line_and_changes_nothing(case, pristine, tmp_path):
    target = prepare(case, pristine, tmp_path)
    before = snapshot(target, with_state=case.planning)
    had_state = (target / STATE).exists()
    out = run_case(case, target, pristine=pristine)
    assert out.returncode != 0, out.stdout + out.stderr
    assert case.status is None or out.returncode == case.status, out.stdout + out.stderr
    check_line(case, out, target)
    assert snapshot(target, with_state=case.planning) == before, "a file in the directory changed"
    if not had_state:
        assert not (target / STATE).exists(), "state folder created for bad input"


@pytest.fixture(scope="session")
def built(pristine, tmp_path_factory) -> dict[str, Path]:
    """The pristine directories, every one built (the multi-orch parent too): each case's copy of one is built
    once more, writing the no-op record, before its breakage (`test_a_noop_record_changes_no_answer`)."""
    multi = tmp_path_factory.mktemp("bad_input_built") / "multi"
    subprocess.run(["cp", "-a", str(pristine["multi"]), str(multi)], check=True)
    build(multi)
    return {**pristine, "multi": multi}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_noop_record_changes_no_answer(case, pristine, built, tmp_path):
    """Every case again on a copy a clean build has just left with its no-op record (issue 32, item 4): the
    same exit status and the same first line on stderr as the case without one. A plain `build` is then
    first the console script's quick answer's, then the pipeline's `noop.check`, to refuse or to leave."""
    (tmp_path / "plain").mkdir()
    want = run_case(case, prepare(case, pristine, tmp_path / "plain"), pristine=pristine)
    copy = tmp_path / "recorded" / case.base
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(built[case.base]), str(copy)], check=True)
    time.sleep(2 * FINE_NS / 1e9)       # the copy settled: the clean build may record it
    assert cli("pypto-build", "build", "-q", str(copy)).returncode == 0
    assert (copy / STATE / "noop.marshal").is_file()
    target = case.breaks(copy)
    out = run_case(case, copy if target is None else target, pristine=pristine)
    first = [next((line for line in o.stderr.splitlines() if line.strip()), "") for o in (want, out)]
    assert out.returncode == want.returncode, out.stdout + out.stderr
    assert first[1].replace(str(tmp_path / "recorded"), str(tmp_path / "plain")) == first[0]


DEBUG_CASES = ["kc_syntax_error", "meta_param_dtype_unknown", "multi_orch_replay", "state_db_garbage",
               "empty_directory", "jobs_zero", "env_platform_unknown"]


@pytest.mark.parametrize("name", DEBUG_CASES)
def test_debug_only_adds_the_traceback(name, pristine, tmp_path):
    """--debug shows the traceback, then the same one line, with the same exit status (issue 22, item 8)."""
    case = next(c for c in CASES if c.name == name)
    (tmp_path / "plain").mkdir()
    (tmp_path / "debug").mkdir()
    plain = run_case(case, prepare(case, pristine, tmp_path / "plain"), pristine=pristine)
    target = prepare(case, pristine, tmp_path / "debug")
    out = run_case(case, target, debug=True, pristine=pristine)
    assert "Traceback (most recent call last)" in out.stderr, out.stderr
    assert out.returncode == plain.returncode, out.stderr
    line = plain.stderr.strip().replace(str(tmp_path / "plain"), str(tmp_path / "debug"))
    assert out.stderr.strip().splitlines()[-1] == line


@pytest.mark.parametrize("name", ["kc_syntax_error", "state_db_garbage", "compile_error"])
def test_doit_build_plugin_in_a_broken_dir(name, pristine, tmp_path):
    """`doit pypto-build` inside the directory: one line (doit's `ERROR: ...` for bad input), nothing changed."""
    case = next(c for c in CASES if c.name == name)
    target = prepare(case, pristine, tmp_path)
    before = snapshot(target, with_state=case.planning)
    out = cli("doit", "pypto-build", cwd=target)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(("ERROR: ", "pypto-build: ")), out.stderr
    assert case.file in lines[0] and re.search(case.what, lines[0]) and FIX_RE.search(lines[0]), lines[0]
    assert snapshot(target, with_state=case.planning) == before


def test_numpy_missing_is_the_run_extra_not_golden_py(pristine, tmp_path):
    """golden.py imports numpy, which this Python lacks (torch is there): the line names numpy and the run extra
    (issue 22, item 8), where it used to say "fix golden.py"."""
    python = python_without(tmp_path / "no-numpy", "numpy")
    target = prepare(next(c for c in CASES if c.name == "torch_not_installed"), pristine, tmp_path)
    golden = target / "golden.py"
    golden.write_text("import numpy\n" + golden.read_text())
    out = cli(str(python), "-m", "pypto_build", "validate", str(target))
    assert out.returncode == 1
    failed = [line for line in out.stderr.splitlines() if line.startswith("pypto-build: FAILED")]
    assert failed == [f"pypto-build: FAILED validate:.: validation of {target} failed: {golden}: importing golden.py: "
                      f"module 'numpy' is not installed for {python}; replay and validate need the run extra: "
                      "pip install 'pypto_build[run]'"], out.stderr


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40


if __name__ == "__main__":      # print the corpus: case -> message
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        dirs = make_pristine(base / "p")
        only = sys.argv[1:]
        for i, case in enumerate(CASES):
            if only and case.name not in only:
                continue
            work = base / f"c{i}"
            work.mkdir()
            target = prepare(case, dirs, work)
            out = run_case(case, target, pristine=dirs)
            err = out.stderr.strip().replace(str(target), "DIR")
            print(f"{case.name} [{out.returncode}] -> {err}")
