"""The no-op record's answers make every refusal the full path makes (issue 32, item 4): a bad setting, the
state folder (or a link in it) leading out of the directory, a lock or state database that is no regular file
is refused in the same one line, record or not — by the console script's quick answer (noop_record.quick) and
by the pipeline's (`noop.check`). The whole bad-input corpus is run with a record too: tests/test_bad_input.py."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import imported, settle_ctimes
from pypto_build.api import build
from pypto_build.plan import noop_record

pytestmark = pytest.mark.slow

RECORD = ".pypto_build/noop.marshal"
DB = ".pypto_build/state/host/state.sqlite3"


def recorded(root: Path) -> Path:
    """`root` (a fresh copy of a built directory) built once more: nothing compiles, the no-op record is written."""
    settle_ctimes()                 # the copy's files settled: the run may record them
    build(root)
    assert (root / RECORD).is_file()
    return root


def quick(root: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pypto-build build DIR`, the console script (its quick answer first), with what it imported."""
    return subprocess.run([str(Path(sys.executable).parent / "pypto-build"), "build", str(root)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {}), "PYTHONPROFILEIMPORTTIME": "1"})


def full(root: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The same command through `main()` (argparse, the pipeline, `noop.check`), never the quick answer."""
    code = "import sys; from pypto_build.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "build", str(root)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def said(out: subprocess.CompletedProcess) -> tuple[int, str]:
    """The exit status and the one line on stderr (import-time lines left out)."""
    lines = [line for line in out.stderr.splitlines() if line.strip() and not line.startswith("import time:")]
    assert len(lines) <= 1, out.stderr
    return out.returncode, lines[0] if lines else ""


BAD_SETTINGS = [
    {"PYPTO_COMPILER_TIMEOUT": "-1"},
    {"PYPTO_BUILD_PCH_SIZE": "lots"},
    {"PYPTO_PTOAS_TIMEOUT": "0"},
    {"PYPTO_RUN_TIMEOUT": "soon"},
    {"PYPTO_BUILD_PCH": "maybe"},
    {"PYPTO_REBUILD_FROM_PTO": "maybe"},
    {"PYPTO_BUILD_PLATFORM": "bar"},
    {"CXX": 'g++ "-O2'},
    {"CXXFLAGS": "-DNAME='a b"},
    {"PYPTO_BUILD_CACHE_SIZE": "lots", "PYPTO_BUILD_CACHE": "{tmp}/cache"},
]


def test_a_bad_setting_is_refused_with_a_record_as_without(l2, tmp_path):
    """Each bad value (one directory: a refusal changes nothing) is refused by both no-op answers in the line the
    full path says without a record; the record is still there after them all, then removed for the reference."""
    root = recorded(l2)
    envs = [{k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()} for env in BAD_SETTINGS]
    answers = [(said(quick(root, env)), said(full(root, env))) for env in envs]
    assert (root / RECORD).is_file()
    (root / RECORD).unlink()
    for env, (by_quick, by_full) in zip(envs, answers):
        without = said(full(root, env))
        assert without[0] == 2 and next(iter(env)) in without[1], without
        assert by_quick == by_full == without, env
    assert not (tmp_path / "cache").exists()


def move_out(rel: str):
    """Move `rel` out of the directory and link it back (the link leads out of the state folder)."""
    def apply(root: Path) -> None:
        away = root.parent / f"away-{Path(rel).name}"
        shutil.move(root / rel, away)
        (root / rel).symlink_to(away)
    return apply


def fifo(rel: str):
    def apply(root: Path) -> None:
        (root / rel).unlink(missing_ok=True)
        os.mkfifo(root / rel)
    return apply


def folder(rel: str):
    def apply(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).mkdir()
    return apply


def garbage(root: Path) -> None:
    (root / DB).write_bytes(b"this is not an sqlite database\n" * 40)


OUT = r"resolves outside the build directory .*; replace the symbolic link"
STATE_BREAKAGES = [
    ("host_outputs_linked_out", move_out(".pypto_build/host"), r"\.pypto_build/host: entry of the state folder " + OUT),
    ("platform_state_linked_out", move_out(".pypto_build/state/host"), r"state/host: entry of the state folder " + OUT),
    ("record_linked_out", move_out(RECORD), r"noop\.marshal: entry of the state folder " + OUT),
    ("state_folder_linked_out", move_out(".pypto_build"), r"\.pypto_build: state folder " + OUT),
    ("lock_fifo", fifo(".pypto_build/lock"), r"lock: is a FIFO \(named pipe\), not a regular file; remove it"),
    ("lock_directory", folder(".pypto_build/lock"), r"lock: is a directory, not a regular file; remove it"),
    ("state_db_fifo", fifo(DB), r"state\.sqlite3: is a FIFO \(named pipe\), not a regular file; remove it"),
    ("state_journal_fifo", fifo(f"{DB}-journal"), r"state\.sqlite3-journal: is a FIFO"),
    ("state_db_garbage", garbage, r"state\.sqlite3: the build state is unreadable \(file is not a database\)"),
]


@pytest.mark.parametrize("name, breaks, line", STATE_BREAKAGES, ids=[b[0] for b in STATE_BREAKAGES])
def test_the_state_folder_is_judged_before_a_noop_answer(l2, name, breaks, line):
    """Nothing else changed: the full path refuses the state folder as it is (before, a record answered 0 from
    the link, read the record through one, or never looked at the lock or the database)."""
    breaks(recorded(l2))
    by_quick, by_full = quick(l2), full(l2)
    assert said(by_quick) == said(by_full), by_quick.stderr
    status, first = said(by_full)
    assert status == 2 and re.search(line, first), first
    assert "pypto_build.cli.main" in imported(by_quick.stderr), "the quick answer declined"
    if name != "record_linked_out":                     # the same line without a record
        (l2 / RECORD).unlink(missing_ok=True)         # a refusal under the lock has removed it
        assert said(full(l2)) == (status, first)


def test_a_removed_state_database_is_not_a_noop(l2):
    """Without its state a build compiles every unit once: the record, which summarised that state, answers
    nothing."""
    (recorded(l2) / DB).unlink()
    out = quick(l2)
    assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("pypto-build: 4 compiled"), out.stdout


def test_a_link_kept_inside_the_state_folder_leaves_the_answer_to_the_full_path(l2):
    """A link that stays inside the directory is accepted (the full path answers, from the record); the quick
    answer, which compares only folders and regular files there, leaves it to the full path."""
    root = recorded(l2)
    (root / ".pypto_build/notes").symlink_to(root / "kernels")
    (root / RECORD).unlink()
    build(root)                     # recorded again, over the link
    assert (root / RECORD).is_file()
    out = quick(root)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"
    assert "pypto_build.cli.main" in imported(out.stderr)
    assert noop_record.load(root)["quick"] is None


def test_the_quick_answer_compares_every_setting_a_build_judges():
    """Every variable the full path judges is in what the quick answer compares (`noop_record.environment`): it
    answers only under the environment a run that judged it recorded."""
    package = Path(noop_record.__file__).resolve().parents[1]
    names = set()
    for source in package.rglob("*.py"):
        names |= set(re.findall(r"\"((?:PYPTO|PTO|CXX)[A-Z_]*)\"", source.read_text(encoding="utf-8")))
    assert {"PYPTO_COMPILER_TIMEOUT", "PYPTO_BUILD_PCH_SIZE", "CXXFLAGS", "PTOAS_ROOT"} <= names
    assert noop_record.environment({name: "x" for name in names}) == {name: "x" for name in names}
