"""Trust in a stat rests on ctime, which no user call sets: an mtime in the future or past decides nothing."""
from __future__ import annotations

import os
import time

from conftest import settle_ctimes
from pypto_build.core.filestate import is_modified, make_state
from pypto_build.core import racy
from pypto_build.core.racy import changed_since, fs_now

FUTURE = time.time() + 86400


def test_a_state_taken_right_after_a_change_is_not_trusted_by_stat(tmp_path):
    path = tmp_path / "h.h"
    path.write_text("one\n")
    state = make_state(str(path))
    assert state[4] is not None and state[5] is False
    settle_ctimes()
    assert make_state(str(path))[5] is True


def test_an_mtime_in_the_future_is_trusted_once_the_change_settled(tmp_path):
    path = tmp_path / "h.h"
    path.write_text("one\n")
    os.utime(path, (FUTURE, FUTURE))
    settle_ctimes()
    state = make_state(str(path), changed_since_ns=time.time_ns())
    assert state[4] is not None, "not 'changed while compiling': its last change is older than the compile"
    assert state[5] is True
    assert not is_modified(str(path), os.stat(path), state)


def test_a_change_after_a_compile_started_leaves_no_digest_whatever_the_mtime(tmp_path):
    path = tmp_path / "h.h"
    path.write_text("one\n")
    settle_ctimes()
    started = fs_now(tmp_path / "out.so")                           # the file system's clock, as a compile reads it
    path.write_text("two\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))       # dated 2001: a `touch -d`, a `cp -p`
    st = os.stat(path)
    assert changed_since(st, started, fs_clock=True)
    assert make_state(str(path), st, changed_since_ns=started)[4] is None


def test_a_digest_is_reused_only_once_the_file_has_settled(tmp_path, monkeypatch):
    """The per-process digest memo follows the racy rule: a same-size rewrite within one timestamp tick
    keeps the stat, so the digest of a file changed within the window is never reused."""
    from pypto_build.core import hashing

    f = tmp_path / "k.cpp"
    f.write_text("int a;\n")
    key = hashing.stat_key(str(f), f.stat())
    first = hashing.file_digest(str(f))
    assert key not in hashing._memo                      # just written: hashed again next time
    later = time.time_ns() + 10 * racy.RACY_NS
    monkeypatch.setattr(hashing.time, "time_ns", lambda: later)
    assert hashing.file_digest(str(f)) == first
    assert hashing._memo[key] == first                   # settled: reused while its stat is unchanged
