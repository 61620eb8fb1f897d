"""The no-op record's watch of a git checkout (`git_watch`): it reads "unchanged" only while git would.

Real repositories made with real `git` commands; every change is also put to `git status`, so the
test shows what git itself reports for it.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import age_tree, git, same_size_edit, settle_ctimes
from pypto_build.toolchain.git_watch import signatures_of, watch_tree
from pypto_build.toolchain.watch_stats import SPLIT_FROM, _in_two, signatures, unchanged
from pypto_build.toolchain.identity import clean_git_revision

HEADER = "include/pto/a.hpp"


def status(repo: Path) -> str:
    """What `clean_git_revision` asks of git (its first line, as git prints it)."""
    out = subprocess.run(["git", "status", "--porcelain=v1", "--untracked-files=normal"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout
    return out.rstrip("\n")


def make_repo(path: Path) -> Path:
    """A checkout with a header, an untracked-free empty directory, and an ignored build directory."""
    (path / "include" / "pto").mkdir(parents=True)
    (path / HEADER).write_text("int a = 1;\n")
    (path / "empty").mkdir()
    (path / ".gitignore").write_text("build/\n")
    (path / "build").mkdir()
    (path / "build" / "x.o").write_text("object\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-qm", "one")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    return make_repo(tmp_path / "repo")


def taken(repo: Path):
    """The watch of a clean checkout and its state, as a record keeps them.

    The files are dated an hour back first (`age_tree`): git rewrites its index on every status while a
    file is as new as the index ("racily clean"), which would be a change each time.
    """
    age_tree(repo)
    assert status(repo) == ""       # refreshes the index once
    settle_ctimes()
    watch = watch_tree(repo)
    assert watch is not None
    now = signatures_of(watch)
    assert now is not None and signatures_of(watch) == now
    return watch, now


def test_a_clean_checkout_reads_unchanged_and_its_identity_is_gits(repo):
    watch, now = taken(repo)
    assert clean_git_revision(repo).value == git(repo, "rev-parse", "HEAD")
    assert set(watch.paths) >= {HEADER, ".gitignore", ".", "include", "include/pto", "empty"}
    assert "build" not in watch.paths and "build/x.o" not in watch.paths      # ignored: git never reports it
    assert signatures_of(watch) == now


@pytest.mark.parametrize("change", ["same-size edit, mtime put back", "untracked file", "untracked in a subdirectory",
                                    "file in an empty directory", "new directory", "staged mode change",
                                    "deleted file", "exclude rule dropped"])
def test_a_change_git_status_reports_is_seen(repo, change):
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("scratch/\n")
    (repo / "scratch").mkdir()
    (repo / "scratch" / "notes.txt").write_text("mine\n")
    watch, now = taken(repo)
    if change == "same-size edit, mtime put back":
        same_size_edit(repo / HEADER)
        expect = f" M {HEADER}"
    elif change == "untracked file":
        (repo / "new.hpp").write_text("\n")
        expect = "?? new.hpp"
    elif change == "untracked in a subdirectory":
        (repo / "include" / "pto" / "b.hpp").write_text("\n")
        expect = "?? include/pto/b.hpp"
    elif change == "file in an empty directory":
        (repo / "empty" / "c.hpp").write_text("\n")
        expect = "?? empty/"
    elif change == "new directory":
        (repo / "more").mkdir()
        (repo / "more" / "d.hpp").write_text("\n")
        expect = "?? more/"
    elif change == "staged mode change":
        git(repo, "update-index", "--chmod=+x", HEADER)
        expect = f"MM {HEADER}"         # staged +x; the file itself is not executable
    elif change == "deleted file":
        (repo / HEADER).unlink()
        expect = f" D {HEADER}"
    else:
        (repo / ".git" / "info" / "exclude").write_text("")
        expect = "?? scratch/"
    assert status(repo) == expect
    assert clean_git_revision(repo).value is None
    assert signatures_of(watch) != now


def test_a_same_size_edit_with_its_mtime_put_back_is_seen_within_the_same_second(repo):
    watch, now = taken(repo)
    before = (repo / HEADER).stat()
    (repo / HEADER).write_text("int a = 5;\n")
    os.utime(repo / HEADER, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert signatures_of(watch) != now


def test_a_config_file_git_would_include_is_watched_before_it_exists(repo):
    """`[include] path = ...` of a missing file: creating it may change what git ignores or compares."""
    git(repo, "config", "include.path", "extra.cfg")
    watch, now = taken(repo)
    assert str(repo / ".git" / "extra.cfg") in watch.optional
    (repo / ".git" / "extra.cfg").write_text("[status]\n\tshowUntrackedFiles = no\n")
    assert signatures_of(watch) != now


def test_what_git_ignores_leaves_the_watch_unchanged(repo):
    watch, now = taken(repo)
    (repo / "build" / "y.o").write_text("object\n")
    (repo / "build" / "x.o").write_text("another object\n")
    assert status(repo) == ""
    assert signatures_of(watch) == now


@pytest.mark.parametrize("move", ["commit", "checkout another commit", "packed ref, then commit"])
def test_a_moved_head_is_seen(repo, move):
    (repo / HEADER).write_text("int a = 2;\n")
    git(repo, "commit", "-qam", "two")
    if move == "packed ref, then commit":
        git(repo, "pack-refs", "--all")
        assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    if move == "checkout another commit":
        git(repo, "checkout", "-q", "--detach", "HEAD")           # watched while detached
    watch, now = taken(repo)
    head = git(repo, "rev-parse", "HEAD")
    if move == "checkout another commit":
        git(repo, "checkout", "-q", "--detach", "HEAD~1")
    else:
        git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    assert status(repo) == "" and clean_git_revision(repo).value != head
    assert signatures_of(watch) != now


def test_a_linked_worktree_is_watched_with_its_own_head_and_index(repo, tmp_path):
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    assert (linked / ".git").is_file()
    watch, now = taken(linked)
    assert any(p.endswith(os.path.join("worktrees", "linked", "index")) for p in watch.optional)
    git(linked, "commit", "-q", "--allow-empty", "-m", "on side")    # its branch's ref, in the common dir
    assert signatures_of(watch) != now
    watch, now = taken(linked)
    same_size_edit(linked / HEADER)
    assert status(linked) == f" M {HEADER}" and signatures_of(watch) != now


@pytest.mark.parametrize("index", ["version 4", "split"])
def test_an_index_git_writes_in_another_form_is_watched(repo, index):
    """git lists the files, so the index's form (v4 path compression, a split index) does not matter."""
    if index == "version 4":
        git(repo, "update-index", "--index-version", "4")
        assert (repo / ".git" / "index").read_bytes()[4:8] == (4).to_bytes(4, "big")
    else:
        git(repo, "update-index", "--split-index")
        assert list((repo / ".git").glob("sharedindex.*"))
    watch, now = taken(repo)
    same_size_edit(repo / HEADER)
    assert status(repo) == f" M {HEADER}" and signatures_of(watch) != now
    git(repo, "commit", "-qam", "two")
    watch, now = taken(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "three")
    assert signatures_of(watch) != now


def test_a_tree_git_must_judge_is_not_watched(repo, tmp_path):
    """A submodule (another checkout's status), or a bit that hides edits from git status: git decides every run."""
    hidden = make_repo(tmp_path / "hidden")
    git(hidden, "update-index", "--assume-unchanged", HEADER)
    assert watch_tree(hidden) is None
    sub = make_repo(tmp_path / "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo, "commit", "-qm", "with a submodule")
    assert status(repo) == ""
    assert watch_tree(repo) is None
    assert watch_tree(tmp_path / "not-a-checkout") is None


def test_a_file_changed_after_the_answer_is_never_watched(repo):
    """`since_ns`: git's answer came before; a file changed at or after it may not be what git saw."""
    watch, _now = taken(repo)
    since = time.time_ns()
    (repo / HEADER).write_text("int a = 3;\n")
    assert signatures_of(watch, since) is None


def test_a_large_tree_compared_in_two_processes_sees_a_change_in_either_half(tmp_path):
    """The console script's quick answer compares a large tree's first half in a forked child
    (`watch_stats.unchanged(split=True)`): a change in either half, or a missing file, is "changed".
    `_in_two` is that comparison itself, which `unchanged` would quietly replace by one process's."""
    top = tmp_path / "tree"
    top.mkdir()
    paths = [f"f{i:05}" for i in range(SPLIT_FROM + 10)]       # still SPLIT_FROM past the first 6
    for p in paths:
        (top / p).write_text("1")
    optional = [str(tmp_path / "absent"), str(tmp_path / "config")]
    (tmp_path / "config").write_text("x")
    tree = (str(top), paths, optional, signatures(str(top), paths, optional))
    assert _in_two([tree]) is True and unchanged([tree], split=True) and unchanged([tree])
    for changed in (paths[3], paths[-3]):           # the child's half, then this process's
        before = (top / changed).read_bytes()
        same_size_edit(top / changed)
        assert _in_two([tree]) is False and not unchanged([tree], split=True) and not unchanged([tree])
        tree = (str(top), paths, optional, signatures(str(top), paths, optional))
        assert _in_two([tree]) is True and (top / changed).read_bytes() != before
    (top / paths[5]).unlink()
    assert _in_two([tree]) is False
    tree = (str(top), paths[6:], optional, signatures(str(top), paths[6:], optional))
    assert _in_two([tree]) is True
    (tmp_path / "absent").write_text("now here")    # an optional file appearing
    assert _in_two([tree]) is False
