"""Compile stage, the per-file rule under every check (issue 23 item 9): `filestate` and `racy`.

Whether a file changed since its recorded state: content (xxh3) decides, the stat only short-circuits,
and a stat is trusted only outside the racy window, on ctime, never mtime. Hand-made states of files in
tmp_path; the clock is set, never waited for.
"""
from __future__ import annotations

import os
import signal
import time
import types
from pathlib import Path

import pytest

from pypto_build.core import filestate, racy
from pypto_build.core.filestate import FileState
from pypto_build.core.hashing import file_digest


def settled(monkeypatch) -> None:
    """States recorded from now on are trusted by stat (as once the racy window has passed)."""
    later = time.time_ns() + 2 * racy.RACY_NS
    monkeypatch.setattr(filestate.time, "time_ns", lambda: later)


@pytest.fixture
def afile(tmp_path) -> Path:
    path = tmp_path / "f.h"
    path.write_text("#define X 1\n")
    return path


def state_of(path: Path, *, digest: str | None, trusted: bool, **moved: int) -> list:
    st = os.stat(path)
    fields = {"mtime_ns": st.st_mtime_ns, "size": st.st_size, "ino": st.st_ino, "ctime_ns": st.st_ctime_ns,
              "digest": digest, "trusted": trusted, **moved}
    return list(FileState(**fields))


@pytest.fixture
def no_reads(monkeypatch):
    """Make any content read by filestate fail the test."""
    def read(*_args, **_kwargs):
        raise AssertionError("the file was read")
    monkeypatch.setattr(filestate, "file_digest", read)


def test_filestate_same_stat_trusted_is_not_read(afile, no_reads):
    state = state_of(afile, digest="not the digest", trusted=True)
    assert not filestate.is_modified(str(afile), os.stat(afile), state)
    assert filestate.first_changed({str(afile): state}) is None


def test_filestate_untrusted_same_stat_content_decides(afile):
    st, real = os.stat(afile), file_digest(str(afile))
    assert filestate.is_modified(str(afile), st, state_of(afile, digest="not the digest", trusted=False))
    assert not filestate.is_modified(str(afile), st, state_of(afile, digest=real, trusted=False))


def test_filestate_stat_moved_content_decides(afile):
    st, real = os.stat(afile), file_digest(str(afile))
    touched = {"mtime_ns": st.st_mtime_ns - 1, "ctime_ns": st.st_ctime_ns - 1}
    assert not filestate.is_modified(str(afile), st, state_of(afile, digest=real, trusted=True, **touched))
    assert filestate.is_modified(str(afile), st, state_of(afile, digest="other", trusted=True, **touched))
    refreshed = filestate.refreshed_file(str(afile), state_of(afile, digest=real, trusted=True, **touched))
    assert FileState(*refreshed)[:5] == (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, real)


def test_filestate_refreshed_only_for_an_unchanged_file_whose_stat_moved(afile, monkeypatch):
    settled(monkeypatch)
    st, real = os.stat(afile), file_digest(str(afile))
    assert filestate.refreshed(str(afile), st, state_of(afile, digest=real, trusted=True)) is None   # nothing moved
    assert filestate.refreshed_file(str(afile), state_of(afile, digest="other", trusted=True, size=1)) is None
    assert filestate.refreshed_file(str(afile) + ".gone", state_of(afile, digest=real, trusted=True)) is None
    assert filestate.refreshed_file(str(afile), None) is None
    # An untrusted state of an unchanged file becomes trusted once the window has passed.
    new = filestate.refreshed(str(afile), st, state_of(afile, digest=real, trusted=False))
    assert FileState(*new).trusted is True and FileState(*new).digest == real


def test_filestate_size_change_is_changed_without_reading(afile, no_reads):
    st = os.stat(afile)
    state = state_of(afile, digest="whatever", trusted=False, size=st.st_size + 1)
    assert filestate.is_modified(str(afile), st, state)


def test_filestate_no_digest_is_always_changed(afile, no_reads):
    """A state recorded while the compiler may have been reading a changing file (no digest): rebuild."""
    assert filestate.is_modified(str(afile), os.stat(afile), state_of(afile, digest=None, trusted=True))


def test_filestate_fifo_counts_as_changed_and_is_never_read(tmp_path):
    fifo = tmp_path / "fifo.h"
    os.mkfifo(fifo)
    old = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("blocked on a FIFO"))
    signal.alarm(5)
    try:
        st = os.stat(fifo)
        assert filestate.is_modified(str(fifo), st, state_of(fifo, digest="x", trusted=True))
        assert filestate.first_changed({str(fifo): state_of(fifo, digest="x", trusted=True)}) == f"{fifo} changed"
        assert FileState(*filestate.make_state(str(fifo))).digest is None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("saved", [None, "", "abcdef", 42, {}, [], [1, 2, 3], [1, 2, 3, 4, "d", True, 7],
                                   {"mtime_ns": 1}])
def test_filestate_malformed_input_has_no_digest_and_counts_as_changed(afile, saved):
    assert filestate.digest_of(saved) is None
    assert not filestate.same_stat(os.stat(afile), saved)
    assert filestate.is_modified(str(afile), os.stat(afile), saved)


def test_filestate_reads_back_what_make_state_stores(afile):
    stored = filestate.make_state(str(afile))
    assert isinstance(stored, list) and len(stored) == len(FileState._fields)
    assert FileState(*stored).digest == file_digest(str(afile))
    assert filestate.first_changed({str(afile): stored}) is None
    assert filestate.first_changed({str(afile) + ".gone": stored}) == f"{afile}.gone removed"


def test_filestate_racy_window_decides_trust_and_digest(afile, monkeypatch):
    """No sleeping: the clock is set around the file's ctime."""
    ctime = os.stat(afile).st_ctime_ns
    monkeypatch.setattr(filestate.time, "time_ns", lambda: ctime)
    assert FileState(*filestate.make_state(str(afile))).trusted is False         # changed just now
    monkeypatch.setattr(filestate.time, "time_ns", lambda: ctime + 2 * filestate.RACY_NS)
    assert FileState(*filestate.make_state(str(afile))).trusted is True          # settled
    # A change at or after the compile's start (an fs_now reading): no digest, the unit rebuilds.
    assert FileState(*filestate.make_state(str(afile), changed_since_ns=ctime)).digest is None
    later = filestate.make_state(str(afile), changed_since_ns=ctime + filestate.RACY_NS + 1)
    assert FileState(*later).digest == file_digest(str(afile))


@pytest.mark.parametrize("ctime_ns, since_ns, fs_clock, changed", [
    (10 * 10**9 + 1, 10 * 10**9 + 2, True, False),      # fine timestamps, the file system's clock: exact
    (10 * 10**9 + 2, 10 * 10**9 + 2, True, True),       # at the start counts
    (10 * 10**9 + 1, 10 * 10**9 + 2, False, True),      # our clock: a few coarse ticks of slack
    (10 * 10**9 + 1, 10 * 10**9 + racy.FINE_NS + 2, False, False),
    (10 * 10**9, 11 * 10**9, True, True),               # whole seconds: two seconds either way
    (10 * 10**9, 10 * 10**9 + racy.RACY_NS + 1, True, False),
])
def test_racy_window_is_on_ctime_and_wider_for_whole_second_timestamps(ctime_ns, since_ns, fs_clock, changed):
    st = types.SimpleNamespace(st_ctime_ns=ctime_ns, st_mtime_ns=0)
    assert racy.changed_since(st, since_ns, fs_clock=fs_clock) is changed
