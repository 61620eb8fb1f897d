"""Compile stage, the check (issue 23 item 9): why a unit is stale, with hand-made states and files.

`uptodate.UnitCheck` / `StepCheck` are called as doit calls them (`check(task, values)`), on values
written here as `run_compile` records them; the header sets (`header_sets`), the depfile reading
(`depfile`) are tested on files in tmp_path. Reasons are
exact strings: `explain` and the progress lines show them. No compiler, no doit run (the per-file rule,
`filestate` and `racy`: test_stage_compile_filestate.py; the doit state's fixes,
`engine/depstate.ContentDependency`: test_stage_compile_state.py).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pypto_build.core import filestate, racy
from pypto_build.compile import header_sets
from pypto_build.compile.depfile import TRACKING, DepfileError, parse_depfile, written_target
from pypto_build.core.filestate import FileState, make_state
from pypto_build.core.hashing import file_digest
from pypto_build.compile.header_sets import SetChecker
from pypto_build.compile.checks import StepCheck, UnitCheck

FOLDER = ".pypto_build/state/fake"


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """The build root as every action and check sees it: the working directory, with a header, an output
    and a header outside the build directory."""
    root = tmp_path / "root"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels/common.h").write_text("#define X 1\n")
    (root / "kernels/k.so").write_text("fake-object 1\n")
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys/vector.h").write_text("// system\n")
    monkeypatch.chdir(root)
    return root


def settled(monkeypatch) -> None:
    """States recorded from now on are trusted by stat (as once the racy window has passed)."""
    later = time.time_ns() + 2 * racy.RACY_NS
    monkeypatch.setattr(filestate.time, "time_ns", lambda: later)


def recorded(here: Path, *, outside: bool = False) -> dict:
    """The values `run_compile` returns for a unit that read kernels/common.h (and a system header)."""
    values = {"argv": "argv-1", "compiler": "cxx-1", "context": "ctx-1", "tracking": TRACKING,
              "headers": {"kernels/common.h": make_state("kernels/common.h")}, "outside": None,
              "output": make_state("kernels/k.so")}
    if outside:
        system = str(here.parent / "sys/vector.h")
        values["outside"] = header_sets.store({system: make_state(system)}, FOLDER)
    return values


def check(**changed) -> UnitCheck:
    fields = {"argv": "argv-1", "compiler": "cxx-1", "context_digest": "ctx-1", "why_unknown": None,
              "output": "kernels/k.so", "sets": SetChecker(FOLDER), **changed}
    return UnitCheck(**fields)


def reason(utd, values) -> str:
    fresh = utd(None, values)
    assert fresh == (utd.reason == "")
    return utd.reason


# ---------------------------------------------------------------------------
# UnitCheck: each reason, in the order it is asked
# ---------------------------------------------------------------------------


def test_unit_unchanged_is_up_to_date(here):
    utd = check()
    assert utd(None, recorded(here, outside=True)) is True
    assert repr(utd) == "unit inputs unchanged"


@pytest.mark.parametrize("values, utd, why", [
    ({}, check(), "never built"),
    (None, check(), "never built"),
    ({"forced": "--recompile"}, check(), "forced by --recompile"),
    ("argv", check(argv="argv-2"), "command line changed"),
    ("argv", check(compiler="cxx-2"), "compiler changed"),
    ("argv", check(context_digest="ctx-2"), "runtime/PTO-ISA identity changed"),
    ("argv", check(context_digest=None, why_unknown="runtime identity unknown (no git)"),
     "runtime identity unknown (no git)"),
    ("argv", check(context_digest=None), "identity unknown"),
])
def test_unit_reason_from_the_values(here, values, utd, why):
    if values == "argv":
        values = recorded(here)
    assert reason(utd, values) == why


def test_a_forced_unit_says_so_before_anything_else(here):
    assert reason(check(argv="argv-2"), {**recorded(here), "forced": "invalidate_binary_cache()"}) == \
        "forced by invalidate_binary_cache()"


def test_the_command_line_is_asked_before_the_headers(here):
    values = recorded(here)
    Path("kernels/common.h").write_text("#define X 2\n")
    assert reason(check(argv="argv-2"), values) == "command line changed"
    assert reason(check(), values) == "header kernels/common.h changed"


def test_headers_recorded_without_system_headers_rebuild_once(here):
    assert reason(check(), {**recorded(here), "tracking": "MMD"}) == \
        "headers recorded by an older pypto_build (system headers left out)"


def test_a_header_edited_or_removed_is_named(here):
    values = recorded(here)
    Path("kernels/common.h").write_text("#define X 2\n")
    assert reason(check(), values) == "header kernels/common.h changed"
    Path("kernels/common.h").unlink()
    assert reason(check(), values) == "header kernels/common.h removed"


def test_a_header_touched_only_is_not_a_change(here):
    values = recorded(here)
    os.utime("kernels/common.h", ns=(1, 1))
    assert reason(check(), values) == ""


def test_a_racy_header_is_rebuilt_though_its_content_is_back(here):
    """A header that may have changed while the compiler read it (ctime at or after the compile's start)
    is recorded without a digest: the unit rebuilds next time, whatever the content."""
    start = racy.fs_now("kernels/k.so")
    Path("kernels/common.h").write_text("#define X 1\n")              # same content, changed during the compile
    values = {**recorded(here), "headers": {"kernels/common.h": make_state("kernels/common.h", changed_since_ns=start)}}
    assert FileState(*values["headers"]["kernels/common.h"]).digest is None
    assert reason(check(), values) == "header kernels/common.h changed"


def test_a_header_outside_the_build_directory_is_checked_through_its_set(here):
    values = recorded(here, outside=True)
    system = here.parent / "sys/vector.h"
    system.write_text("// system, updated\n")
    assert reason(check(), values) == f"header {system} changed"


def test_a_missing_set_record_is_stale(here):
    values = recorded(here, outside=True)
    header_sets.record_path(values["outside"], FOLDER).unlink()
    assert reason(check(), values) == (f"{header_sets.record_path(values['outside'], FOLDER)} (states of headers "
                                       "outside the build directory) missing or damaged")


def test_the_output_missing_or_modified_is_named(here):
    values = recorded(here)
    Path("kernels/k.so").write_text("fake-object 2\n")                 # same size: content decides
    assert reason(check(), values) == "output kernels/k.so modified since it was built"
    Path("kernels/k.so").unlink()
    assert reason(check(), values) == "output kernels/k.so missing"


def test_a_header_that_became_a_fifo_blocks_the_unit(here):
    values = recorded(here)
    Path("kernels/common.h").unlink()
    os.mkfifo("kernels/common.h")
    utd = check()
    utd(None, values)
    assert "kernels/common.h" in utd.blocked and "FIFO" in utd.blocked


def test_refresh_restats_touched_files_and_nothing_else(here, monkeypatch):
    settled(monkeypatch)
    values = recorded(here)
    assert check().refresh(values) is None                               # nothing moved
    os.utime("kernels/common.h", ns=(10**9, 10**9))
    os.utime("kernels/k.so", ns=(10**9, 10**9))
    new = check().refresh(values)
    for path, state in (("kernels/common.h", new["headers"]["kernels/common.h"]), ("kernels/k.so", new["output"])):
        assert FileState(*state).mtime_ns == 10**9 and FileState(*state).digest == file_digest(path)
    assert {k: v for k, v in new.items() if k not in ("headers", "output")} == \
        {k: v for k, v in values.items() if k not in ("headers", "output")}
    Path("kernels/common.h").write_text("#define X 3\n")               # changed: never refreshed into "unchanged"
    assert check().refresh(new) is None


# ---------------------------------------------------------------------------
# StepCheck (a device kernel's link and payload extraction)
# ---------------------------------------------------------------------------


def test_step_reasons(here):
    Path("kernels/k.o").write_text("object\n")
    values = {"key": "k1", "input": make_state("kernels/k.so"), "output": make_state("kernels/k.o")}
    step = StepCheck("k1", "kernels/k.so", "kernels/k.o")
    assert reason(step, values) == "" and repr(step) == "step inputs unchanged"
    assert reason(step, {}) == "never built"
    assert reason(StepCheck("k2", "kernels/k.so", "kernels/k.o"), values) == "command line or tool changed"
    Path("kernels/k.o").write_text("OBJECT\n")
    assert reason(step, values) == "output kernels/k.o modified since it was built"
    Path("kernels/k.o").unlink()
    assert reason(step, values) == "output kernels/k.o missing"
    Path("kernels/k.so").write_text("fake-object 9\n")
    assert reason(step, values) == "input kernels/k.so changed"


# ---------------------------------------------------------------------------
# header_sets: the states of headers outside the build directory, once per set
# ---------------------------------------------------------------------------


def test_a_set_is_named_by_its_paths_and_digests(here):
    a, b = str(here / "kernels/common.h"), str(here / "kernels/k.so")
    states = {a: make_state(a), b: make_state(b)}
    name = header_sets.name_of(states)
    assert header_sets.name_of(dict(reversed(list(states.items())))) == name         # order does not matter
    os.utime(a, ns=(5, 5))
    assert header_sets.name_of({a: make_state(a), b: states[b]}) == name             # nor the stat
    Path(a).write_text("#define X 2\n")
    assert header_sets.name_of({a: make_state(a), b: states[b]}) != name             # the content does
    assert header_sets.name_of({a: [*states[a][:4], None, True], b: states[b]}) != name   # no digest: its own


def test_a_set_is_stored_once_and_read_back_exactly(here):
    system = str(here.parent / "sys/vector.h")
    states = {system: make_state(system)}
    name = header_sets.store(states, FOLDER)
    record = header_sets.record_path(name, FOLDER)
    inode = record.stat().st_ino
    assert header_sets.store(states, FOLDER) == name and record.stat().st_ino == inode    # intact: not rewritten
    assert header_sets.read(name, FOLDER) == states
    assert header_sets.files_of({name}, FOLDER) == [record.as_posix(), system]
    record.write_text('{"headers": {}}')                                # not that set
    assert header_sets.read(name, FOLDER) is None and header_sets.files_of({name}, FOLDER) is None
    record.write_text("{not json")
    assert header_sets.read(name, FOLDER) is None
    assert header_sets.store(states, FOLDER) == name and header_sets.read(name, FOLDER) == states   # repaired


def test_a_sets_verdict_is_taken_once_per_run(here):
    system = here.parent / "sys/vector.h"
    name = header_sets.store({str(system): make_state(str(system))}, FOLDER)
    sets = SetChecker(FOLDER)
    assert sets.stale(name) == ""
    system.write_text("// changed after the run checked it\n")
    assert sets.stale(name) == ""                                       # the run's verdict stands
    assert SetChecker(FOLDER).stale(name) == f"header {system} changed"   # the next run sees it


def test_prune_keeps_only_the_named_sets(here):
    system = str(here.parent / "sys/vector.h")
    keep = header_sets.store({system: make_state(system)}, FOLDER)
    drop = header_sets.store({str(here / "kernels/common.h"): make_state("kernels/common.h")}, FOLDER)
    folder = here / header_sets.sets_dir(FOLDER)
    (folder / ".x.json.abcd1234.tmp").write_text("a killed writer's temp")
    header_sets.prune(here, {keep}, FOLDER)
    assert sorted(p.name for p in folder.iterdir()) == [f"{keep}.json"] and drop != keep


# ---------------------------------------------------------------------------
# depfile: the exact reading of what `g++ -MD -MF <file> -MT <target>` writes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, deps", [
    ("out.so: a.cpp b.h\n", ["a.cpp", "b.h"]),
    ("out.so: a.cpp \\\n  b.h \\\n  c.h\n", ["a.cpp", "b.h", "c.h"]),               # continuation lines
    ("out.so: a.cpp \\\r\n b.h\r\n", ["a.cpp", "b.h"]),                               # CRLF
    ("out.so: a.cpp b.h a.cpp\n", ["a.cpp", "b.h"]),                                  # duplicates once, in order
    ("out.so: a.cpp c:d.h\n", ["a.cpp", "c:d.h"]),                                    # a ':' is a character
    ("out.so: a\\ b.h\n", ["a b.h"]),                                                 # space
    ("out.so: a\\\tb.h\n", ["a\tb.h"]),                                               # tab
    ("out.so: a\\\\\\ b.h\n", ["a\\ b.h"]),                                           # backslash before a space
    ("out.so: dir\\x.h\n", ["dir\\x.h"]),                                             # other backslashes as is
    ("out.so: a\\#1.h\n", ["a#1.h"]),
    ("out.so: b$$.h\n", ["b$.h"]),
    ("out.so: a.cpp b.h\n\nb.h:\n", ["a.cpp", "b.h"]),                                # -MP phony rules
    ("out.so: a.cpp", ["a.cpp"]),                                                      # no final newline
])
def test_depfile_reads_exactly_what_gcc_writes(text, deps):
    assert parse_depfile(text, "./out.so") == deps


@pytest.mark.parametrize("text, words", [
    ("other.so: a.cpp\n", "does not start with the target 'out.so'"),
    ("out.so: a$b.h\n", "a lone '$'"),
    ("out.so: a#b.h\n", "an unquoted '#'"),
    ("out.so: a\\\\ b.h\n", "ends in a backslash"),                  # even backslashes before a space
    ("out.so: a.h\\\\\n", "ends in a backslash"),                    # a name ending in a backslash at the line end
    ("out.so: a.cpp\nname\nwith newline.h\n", "unexpected text after the rule"),
    ("out.so: a.cpp\n\nc.h:\n", "unexpected rule after the first"),
])
def test_depfile_text_gcc_cannot_have_written_is_refused(text, words):
    with pytest.raises(DepfileError, match=words.replace("$", r"\$").replace("(", r"\(")):
        parse_depfile(text, "./out.so")


def test_the_target_is_matched_as_gcc_writes_it():
    assert written_target("./out.so") == "out.so" and written_target(".//.//k/out.so") == "k/out.so"
    assert written_target("../out.so") == "../out.so"
    assert parse_depfile("../x/out.so: a.cpp\n", "../x/out.so") == ["a.cpp"]
