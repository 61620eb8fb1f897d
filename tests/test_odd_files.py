"""No read blocks on a FIFO or device file (issue 11, item 11).

A FIFO opened for reading blocks until a writer appears — forever, in a build
directory. Every read site is tried with one in place of its file: the read is
refused at once (`safeio.NotRegularFile`, one line naming the file and what it
is), or the file counts as changed and is rewritten. Each test runs under an
alarm (in-process) or a subprocess timeout: a blocked read fails the test
instead of hanging it. The planning-time and failed-unit cases (kernel_config,
sources, headers, state database, lock, raw ptoas output, golden data) are in
the bad-input corpus (`tests/bad_input_corpus.py`, `_odd_file_cases`).
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import types
from pathlib import Path

import pytest

from conftest import HOST_STATE_DB, age_tree, copy_dir, settle_ctimes
from pypto_build.core import hashing
from pypto_build.plan import noop
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.cache.store import ArtifactCache
from pypto_build.core.filestate import is_modified, make_state
from pypto_build.run.golden import GoldenError, load_golden
from pypto_build.core.limits import read_capped
from pypto_build.platforms.host.places import HOST_STAMP, host_binary
from pypto_build.pto.actions import load_record
from pypto_build.core.pyexec import exec_file
from pypto_build.core.safeio import NotRegularFile, read_bytes
from pypto_build.builddir.stamp import stamp_matches

STAMP = HOST_STAMP


class Blocked(BaseException):
    """Raised by the alarm: not an OSError or Exception, so no `except` of the code under test swallows it."""


@pytest.fixture(autouse=True)
def no_block():
    """Fail (SIGALRM) instead of hanging if anything blocks."""
    def blocked(signum, frame):
        raise Blocked("blocked on a read")
    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def fifo_at(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


@contextlib.contextmanager
def odd_files(tmp_path: Path):
    """A FIFO, a listening unix socket and (when mknod is permitted) a character device, by kind name."""
    found = {"a FIFO (named pipe)": fifo_at(tmp_path / "fifo"), "a directory": tmp_path}
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    sock.listen()
    found["a socket"] = tmp_path / "sock"
    try:
        os.mknod(tmp_path / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))     # like /dev/zero: never ends
        found["a character device"] = tmp_path / "zero"
    except OSError:
        pass                                                                     # no CAP_MKNOD here
    try:
        yield found
    finally:
        sock.close()


def test_every_read_helper_refuses_odd_files_at_once(tmp_path):
    with odd_files(tmp_path) as found:
        for kind, path in found.items():
            for read in (read_bytes, hashing.file_digest, read_capped):
                with pytest.raises(NotRegularFile) as info:
                    read(path)
                assert str(info.value) == (f"{path}: is {kind}, not a regular file; replace it with the regular "
                                           "file it should be")
            with pytest.raises(NotRegularFile):
                exec_file(types.ModuleType("m"), path)


def test_checker_counts_a_fifo_as_changed_and_never_reads_it(tmp_path):
    path = tmp_path / "h.h"
    path.write_text("")                       # size 0, as a FIFO's: only the type can tell them apart
    state = make_state(str(path))
    assert state[4] is not None
    fifo_at(path)
    st = os.stat(path)
    assert is_modified(str(path), st, state)
    fifo_state = make_state(str(path), st)
    assert fifo_state[4] is None and not fifo_state[5]        # no digest, never trusted: rebuilt next time


def test_records_read_as_absent_when_a_fifo(tmp_path):
    assert stamp_matches(fifo_at(tmp_path / "binary_context.json"), {"a": 1}) is False
    assert load_record(str(fifo_at(tmp_path / "splice.json"))) == {}
    root = tmp_path / "d"
    (root / ".pypto_build").mkdir(parents=True)
    fifo_at(root / ".pypto_build" / "noop.marshal")
    assert noop.check(root, "key") is None


def test_golden_py_fifo_is_one_line(tmp_path):
    fifo_at(tmp_path / "golden.py")
    with pytest.raises(GoldenError, match=r"golden\.py: is a FIFO \(named pipe\), not a regular file; replace it"):
        load_golden(tmp_path)


@pytest.fixture(scope="module")
def aged_pto(tmp_path_factory) -> Path:
    """Built, aged (past the racy window) and built again: states trusted, the no-op record written."""
    root = synth.write_l2(tmp_path_factory.mktemp("odd") / "d", kernels=2, pto=True)
    build(root)
    age_tree(root)
    build(root)
    assert (root / ".pypto_build" / "noop.marshal").is_file()
    return root


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("rel", [".pypto_build/noop.marshal", STAMP, host_binary("kernels/aiv/main_incore_1_aiv.cpp")])
def test_a_fifo_in_place_of_a_file_we_write_is_replaced(aged_pto, tmp_path, rel):
    """The no-op record (read first), the stamp (compared) and a binary (hashed): rewritten, never read."""
    root = copy_dir(aged_pto, tmp_path / "d")
    before = (aged_pto / rel).read_bytes() if rel != ".pypto_build/noop.marshal" else None
    fifo_at(root / rel)
    settle_ctimes()         # the copy's files are new: a record taken within the racy window is refused
    out = cli("build", str(root))
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert stat.S_ISREG(os.stat(root / rel).st_mode)
    if before is not None:
        assert (root / rel).read_bytes() == before


def test_splice_record_fifo_is_read_as_no_record(aged_pto, tmp_path):
    root = copy_dir(aged_pto, tmp_path / "d")
    raw = root / "ptoas/main_group.cpp"
    raw.write_text(raw.read_text().replace("* 2.0f;", "* 2.0f + 0.0f;"))     # a hand edit: the splice runs
    fifo_at(root / ".pypto_build/splice/main_group.json")
    out = cli("build", str(root))
    assert out.returncode == 0, out.stderr
    assert "+ 0.0f" in (root / "kernels/aiv/main_incore_1_aiv.cpp").read_text()
    assert stat.S_ISREG(os.stat(root / ".pypto_build/splice/main_group.json").st_mode)


@pytest.mark.slow
def test_replay_refuses_a_fifo_in_golden_data(tmp_path):
    """replay: always runs (no file_dep check before it): golden.py must not meet the FIFO; a user error (2)."""
    root = synth.write_l2(tmp_path / "g", kernels=1, golden=True)
    (root / "data").mkdir()
    fifo_at(root / "data" / "inputs.bin")
    out = cli("replay", str(root))
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "data/inputs.bin: is a FIFO (named pipe), not a regular file" in lines[0], out.stderr


@pytest.mark.slow
def test_cache_entry_and_cache_lock_fifo(aged_pto, tmp_path):
    """A planted FIFO in the artefact cache: the entry is a miss (one warning), never read."""
    cache = tmp_path / "cache"
    first = copy_dir(aged_pto, tmp_path / "first")
    assert cli("build", "--recompile", "--cache-dir", str(cache), str(first)).returncode == 0
    entries = sorted(p for p in cache.glob("??/*") if p.is_file())
    assert entries
    for entry in entries:
        fifo_at(entry)
    second = copy_dir(aged_pto, tmp_path / "second")
    out = cli("build", "--recompile", "--cache-dir", str(cache), str(second))
    assert out.returncode == 0, out.stderr
    assert "is a FIFO (named pipe), not a regular file" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    fifo_at(cache / ".lock")
    out = cli("cache", "stats", "--cache-dir", str(cache))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"pypto-build: error: {cache / '.lock'}: is a FIFO (named pipe), not a regular "
                                  "file; replace it with the regular file it should be")
    with pytest.raises(NotRegularFile):
        ArtifactCache(cache).stats()


def test_state_database_fifo_explained_in_one_line_in_process(aged_pto, tmp_path):
    """The API says the same as the CLI: PyptoBuildError naming the database (no sqlite open of a FIFO)."""
    from pypto_build.errors import PyptoBuildError
    root = copy_dir(aged_pto, tmp_path / "d")
    fifo_at(root / HOST_STATE_DB)
    os.utime(root / "kernels/aiv/main_incore_1_aiv.cpp")
    with pytest.raises(PyptoBuildError, match=r"state\.sqlite3: is a FIFO \(named pipe\), not a regular file"):
        build(root)
