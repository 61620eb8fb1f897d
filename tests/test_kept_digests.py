"""Digests of files outside a build directory are kept between runs and reused only for the same stat.

`hashing.keep` writes the settled digests of this process's files outside the directory
(`.pypto_build/digests.json`); `hashing.recall` takes them back, and `file_digest` uses one only
while the file's stat identity (device, inode, size, mtime, ctime) is the one recorded — the
in-process memo's rule, across runs. Real files, real builds.
"""
from __future__ import annotations

import json
import os

import pytest

from conftest import edit, settle_ctimes
from pypto_build.core import hashing
from pypto_build.api import build
from pypto_build.builddir.state_dir import STATE_DIR
from pypto_build.toolchain.compiler import host_compiler


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch):
    """Each test starts as a new process would: nothing memoised, nothing recalled."""
    monkeypatch.setattr(hashing, "_memo", {})
    monkeypatch.setattr(hashing, "_recalled", {})


def record_of(root) -> dict:
    return json.loads((root / STATE_DIR / hashing.RECORD).read_text())


def test_a_build_keeps_the_compilers_digest_and_nothing_inside(l2):
    edit(l2 / "kernels/common.h")
    build(l2)
    kept = record_of(l2)
    compiler = host_compiler().path
    assert kept[compiler][5] == hashing.file_digest(compiler)
    assert all(os.path.isabs(p) and not p.startswith(str(l2)) for p in kept)


def test_a_kept_digest_is_used_only_for_the_same_stat(tmp_path):
    root = tmp_path / "d"
    (root / STATE_DIR).mkdir(parents=True)
    tool = tmp_path / "tool"
    tool.write_bytes(b"one")
    settle_ctimes()
    st = os.stat(tool)
    key = hashing.stat_key(str(tool), st)
    (root / STATE_DIR / hashing.RECORD).write_text(json.dumps({str(tool): [*key[1:], "recorded"]}))
    hashing.recall(root / STATE_DIR)
    assert hashing.file_digest(str(tool)) == "recorded", "same stat: the kept digest, the file not read"
    hashing._memo.clear()
    tool.write_bytes(b"two")                                    # same size, another ctime
    assert hashing.file_digest(str(tool)) == hashing.bytes_digest(b"two")


def test_an_unsettled_digest_is_not_kept_and_an_unchanged_record_not_rewritten(tmp_path):
    root = tmp_path / "d"
    (root / STATE_DIR).mkdir(parents=True)
    settled, fresh = tmp_path / "settled", tmp_path / "fresh"
    settled.write_bytes(b"s")
    settle_ctimes()
    hashing.file_digest(str(settled))
    fresh.write_bytes(b"f")
    hashing.file_digest(str(fresh))                             # changed within the racy window
    hashing.keep(root, root / STATE_DIR)
    assert set(record_of(root)) == {str(settled)}
    before = os.stat(root / STATE_DIR / hashing.RECORD)
    hashing.keep(root, root / STATE_DIR)
    assert os.stat(root / STATE_DIR / hashing.RECORD).st_ino == before.st_ino, "nothing new: not rewritten"
