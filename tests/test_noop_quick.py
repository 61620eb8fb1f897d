"""The entry's quick no-op answer (plan/noop_record.quick): a plain `pypto-build build DIR` answered before
argparse and the rest load — and answered exactly when the full path would answer the same."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import age_tree, edit, git, imported, same_size_edit, settle_ctimes
from pypto_build.plan import invalidation
from pypto_build.testing import synth

# What the command line's machinery loads; none of it is needed to say "nothing to do".
HEAVY = {"argparse", "dataclasses", "json", "subprocess", "inspect", "typing", "doit", "torch", "sqlite3",
         "pypto_build.options", "pypto_build.cli.main", "pypto_build.pipeline", "pypto_build.plan.noop"}


def cli(*args: str, env: dict | None = None, profile: bool = False) -> subprocess.CompletedProcess:
    """The console script itself, as a user runs it (with PYTHONPROFILEIMPORTTIME: what it imported)."""
    extra = {"PYTHONPROFILEIMPORTTIME": "1"} if profile else {}
    return subprocess.run([str(Path(sys.executable).parent / "pypto-build"), *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {}), **extra})


def settled(root: Path, env: dict | None = None) -> Path:
    """Built under `env`, aged past the racy window and built again: the no-op record written by a CLI run."""
    assert cli("build", "-q", str(root), env=env).returncode == 0
    age_tree(root)
    out = cli("build", "-q", str(root), env=env)
    assert out.returncode == 0, out.stderr
    assert (root / ".pypto_build/noop.marshal").is_file()
    return root


def full_path(root: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The same command through `main()` (argparse, the pipeline, `noop.check`), never the quick answer."""
    code = "import sys; from pypto_build.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "build", str(root)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_a_plain_noop_is_answered_before_the_command_line_loads(l2):
    root = settled(l2)
    baseline = imported(subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True,
                                       env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}).stderr)
    out = cli("build", str(root), profile=True)
    assert out.returncode == 0
    assert sorted((imported(out.stderr) - baseline) & HEAVY) == []
    assert "pypto_build.plan.noop_record" in imported(out.stderr)
    full = full_path(root)
    assert full.returncode == 0 and out.stdout == full.stdout       # word for word what the full path says
    assert out.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"
    quiet = cli("build", "-q", "-j", "2", "-k", str(root), profile=True)
    assert quiet.returncode == 0 and quiet.stdout == "" and not (imported(quiet.stderr) - baseline) & HEAVY


def compiled(out: subprocess.CompletedProcess) -> int:
    assert out.returncode == 0, out.stderr
    return int(out.stdout.splitlines()[-1].split("pypto-build: ")[1].split(" compiled")[0])


def test_an_edit_or_an_invalidation_is_seen(l2):
    root = settled(l2)
    edit(synth.kernel_path(root, 1))
    assert compiled(cli("build", str(root))) == 1
    settled(root)
    invalidation.mark(root)
    assert compiled(cli("build", str(root))) == 4


def test_a_compiler_that_now_says_another_version_is_seen(l2, tmp_path):
    """A wrapper `$CXX` whose own file is unchanged but whose `--version` now differs (another compiler behind
    it): the quick answer re-runs `--version`, as the full path does, and falls back."""
    said = tmp_path / "version.txt"
    said.write_text("g++ (wrapped) 1\n")
    wrapper = tmp_path / "my-g++"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then cat {said}; exit 0; fi\nexec g++ "$@"\n')
    wrapper.chmod(0o755)
    env = {"CXX": str(wrapper)}
    root = settled(l2, env)
    assert compiled(cli("build", str(root), env=env)) == 0
    said.write_text("g++ (wrapped) 2\n")
    assert compiled(cli("build", str(root), env=env)) == 4


def test_a_new_compiler_earlier_on_path_is_seen(l2, tmp_path):
    early = tmp_path / "bin"
    early.mkdir()
    env = {"PATH": f"{early}{os.pathsep}{os.environ['PATH']}"}
    root = settled(l2, env)
    assert compiled(cli("build", str(root), env=env)) == 0
    (early / "g++").write_text('#!/bin/sh\nexec /usr/bin/g++ "$@"\n')
    (early / "g++").chmod(0o755)
    assert compiled(cli("build", str(root), env=env)) == 4


@pytest.mark.parametrize("args, env, message", [
    (["-j", "0"], {}, "-j/--jobs 0: out of range"),
    ([], {"PYPTO_RUN_TIMEOUT": "soon"}, "PYPTO_RUN_TIMEOUT"),
    ([], {"PYPTO_REBUILD_FROM_PTO": "perhaps"}, "PYPTO_REBUILD_FROM_PTO"),
    ([], {"PYPTO_BUILD_LAUNCHER": "no-such-launcher-here"}, "no-such-launcher-here"),
])
def test_bad_input_is_refused_even_when_nothing_changed(l2, args, env, message):
    """What the full path refuses in one line is refused as before: the quick answer never says 0 for it."""
    root = settled(l2)
    out = cli("build", *args, str(root), env=env)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_simpler_becoming_importable_is_seen(l2, tmp_path):
    """The directory records a2a3sim, served by host only while simpler is missing: once modules of that
    name import, the platform choice changes, so the quick answer must leave the decision to the full path."""
    root = settled(l2)
    assert "not the recorded a2a3sim" in cli("build", str(root)).stdout
    fake = tmp_path / "site"
    fake.mkdir()
    for name in ("simpler", "simpler_setup", "_task_interface"):
        (fake / f"{name}.py").write_text("")
    out = cli("build", str(root), env={"PYTHONPATH": str(fake)}, profile=True)
    assert "pypto_build.cli.main" in imported(out.stderr)      # not answered from the record
    assert "not the recorded a2a3sim" not in out.stdout


# A git checkout whose clean HEAD is an identity (here PTO_ISA_ROOT on host; on a2a3sim / a5sim simpler's checkout
# and its PTO-ISA tree) is compared by the quick answer too, from the watch kept in the record (git_watch): without
# git, and never trusting a tree that may have changed unseen.

WATCHED_CHANGES = ["nothing", "same-size edit, mtime put back", "untracked file", "staged mode change",
                   "branch switched", "new commit"]


def pto_isa_env(repo: Path) -> dict:
    """PTO_ISA_ROOT at `repo` with a tracked NOTES file, its files aged and git's index refreshed once (a file as
    new as the index is "racily clean": git rewrites its index at each status until then)."""
    (repo / "NOTES").write_text("note 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "notes")
    age_tree(repo)
    git(repo, "status")
    settle_ctimes()
    return {"PTO_ISA_ROOT": str(repo)}


@pytest.mark.parametrize("change", WATCHED_CHANGES)
def test_a_watched_checkout_is_answered_quickly_and_what_git_reports_is_seen(l2, pto_isa, change):
    env = pto_isa_env(pto_isa)
    root = settled(l2, env)
    quick = cli("build", str(root), env=env, profile=True)
    assert quick.returncode == 0 and not imported(quick.stderr) & HEAVY, "the quick answer, without git or doit"
    full = full_path(root, env)
    assert full.returncode == 0 and quick.stdout == full.stdout
    assert quick.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"

    if change == "same-size edit, mtime put back":
        same_size_edit(pto_isa / "NOTES")
    elif change == "untracked file":
        (pto_isa / "scratch.txt").write_text("mine\n")
    elif change == "staged mode change":
        git(pto_isa, "update-index", "--chmod=+x", "NOTES")        # the index alone changes
    elif change == "branch switched":
        git(pto_isa, "checkout", "-q", "-b", "side")               # the same commit: HEAD names another ref
    elif change == "new commit":
        git(pto_isa, "commit", "-q", "--allow-empty", "-m", "two")
    dirty = change in ("same-size edit, mtime put back", "untracked file", "staged mode change")
    assert bool(git(pto_isa, "status", "--porcelain")) == dirty
    out = cli("build", str(root), env=env, profile=True)
    assert ("pypto_build.cli.main" in imported(out.stderr)) == (change != "nothing"), "the full path decides"
    # by content: a dirty checkout has no identity (every unit rebuilds), another commit is another identity,
    # another branch at the same commit is the same one
    expect = 4 if dirty or change == "new commit" else 0
    assert compiled(out) == expect


def test_pto_isa_root_through_a_link_pointed_at_another_checkout_is_seen(l2, pto_isa, tmp_path):
    """The record's watch names the checkout PTO_ISA_ROOT resolved to, unchanged after the link moves: the quick
    answer resolves PTO_ISA_ROOT again (`noop_keys` places), as the full path's key does."""
    other = tmp_path / "other-pto-isa"
    git(tmp_path, "clone", "-q", str(pto_isa), str(other))
    (other / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\nnamespace pto { }\n")
    git(other, "commit", "-qam", "other")
    pto_isa_env(pto_isa)
    pto_isa_env(other)
    link = tmp_path / "pto-link"
    link.symlink_to(pto_isa)
    env = {"PTO_ISA_ROOT": str(link)}
    root = settled(l2, env)
    quick = cli("build", str(root), env=env, profile=True)
    assert compiled(quick) == 0 and not imported(quick.stderr) & HEAVY
    link.unlink()
    link.symlink_to(other)
    out = cli("build", str(root), env=env, profile=True)
    assert "pypto_build.cli.main" in imported(out.stderr) and compiled(out) == 4


def test_the_quick_part_compares_every_variable_the_key_names():
    """Where git finds its config (HOME, XDG_CONFIG_HOME, GIT_*) decides a watched checkout's answer: the quick
    answer compares each variable the full path's key names."""
    from pypto_build.plan import noop, noop_record
    env = {**{name: "x" for name in noop.ENV_KEYS}, "GIT_CONFIG_GLOBAL": "x", "UNRELATED": "x"}
    assert noop_record.environment(env) == {k: v for k, v in env.items() if k != "UNRELATED"}
