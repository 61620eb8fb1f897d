"""What `git status` of a clean checkout rests on, so a later run can tell "unchanged" by stat alone.

A covered tree's identity (`identity.clean_git_revision`) is HEAD of a clean
checkout, and asking git costs a few processes per tree and run (0.1-0.6 s for
simpler and PTO-ISA). The no-op record instead keeps, next to git's answer, the
`lstat` signature of everything that answer was made from — mtime and ctime to
the nanosecond, size, inode, device and mode: what git's index compares but the
owner, whose change sets ctime:

* every tracked file. A same-size edit with its mtime put back is seen by its
  ctime (the kernel sets it on every write and `utime`). git compares ctime in
  whole seconds unless built with USE_NSEC, so such an edit within the second
  of git's last look is git's own blind spot; the watch is never blinder;
* every directory git status walks for untracked files (all but `.git` and
  the directories git ignores whole): a file created, removed or renamed
  changes its directory's mtime and ctime;
* git's own files the answer depends on: HEAD, the branch's loose ref and
  `packed-refs`, the index (staging rewrites it), the `.git` link of a linked
  worktree, every config file git read and those it would read if they existed,
  `info/exclude` and the global excludes file. A missing one is recorded as
  missing: its appearance is a change.

`signatures_of` gives them (`watch_stats.signatures`, light: the console script's
quick answer compares them too); the no-op record keeps them whole with the lists.
Any difference sends the run down the full path, where git decides. A watch is
taken after a full build (`noop.record_graph`), never on the no-op path, and is
refused for a file changed after that run's planning began (`racy.changed_since`),
so no change between git's answer and the watch goes unseen.

Not watched (`watch_tree` returns None, the run keeps asking git): a tree with a
submodule (its status is another checkout's), an unmerged entry, an
assume-unchanged or skip-worktree bit (the identity is unknown then anyway), or
any git failure.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.procs import run
from .watch_stats import signatures

GIT_TIMEOUT_S = 30.0
GITLINK = "160000"              # a submodule's mode in the index
_LISTING_BYTES = 256 << 20


@dataclass(frozen=True)
class TreeWatch:
    """The files a clean checkout's `git status` answer rests on: `paths` relative to `root`, each of which must
    exist (tracked files, walked directories); `optional` absolute (git's own files), absence recorded."""

    root: str
    paths: tuple[str, ...]
    optional: tuple[str, ...]


def watch_tree(root: str | os.PathLike) -> TreeWatch | None:
    """The watch of the checkout whose top is `root` (runs git), or None when it cannot be watched exactly."""
    top = os.fspath(root)
    where = _git(top, "rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel",
                 "--symbolic-full-name", "HEAD")
    lines = (where or "").split("\n")
    if len(lines) < 4:
        return None
    git_dir, common, toplevel, head = lines[:4]
    common = os.path.normpath(os.path.join(top, common))
    if os.path.realpath(toplevel) != os.path.realpath(top):
        return None
    listing = _git(top, "ls-files", "-z", "-s", "-v")
    ignored = _git(top, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
    config = _git(top, "config", "--list", "--show-origin", "-z")
    if listing is None or ignored is None or config is None:
        return None
    tracked = []
    for entry in filter(None, listing.split("\0")):
        info, _tab, path = entry.partition("\t")
        tag, mode, _sha, stage = (info.split(" ") + ["", "", "", ""])[:4]
        if tag != "H" or mode == GITLINK or stage != "0":
            return None                 # hidden, a submodule, or unmerged: git decides every run
        tracked.append(path)
    skip = {p.rstrip("/") for p in ignored.split("\0") if p.endswith("/")}
    dirs = []
    for here, subdirs, _files in os.walk(top):
        rel = os.path.relpath(here, top)
        subdirs[:] = [d for d in subdirs if os.path.normpath(os.path.join(rel, d)) not in skip
                      and not (rel == "." and d == ".git")]
        dirs.append(rel)
    own = [os.path.join(git_dir, "HEAD"), os.path.join(git_dir, "index"), os.path.join(git_dir, "commondir"),
           os.path.join(git_dir, "config.worktree"), os.path.join(common, "packed-refs"),
           os.path.join(common, "config"), os.path.join(common, "info", "exclude"),
           os.path.join(common, "info", "attributes")]
    if not os.path.isdir(os.path.join(top, ".git")):
        own.append(os.path.join(top, ".git"))     # a linked worktree's `gitdir:` file (a directory: its lock
                                                  # files come and go with every git status)
    if head.startswith("refs/"):
        own.append(os.path.join(common, head))
    own += _config_files(top, config)
    return TreeWatch(top, (*tracked, *dirs), tuple(dict.fromkeys(os.path.normpath(p) for p in own)))


def signatures_of(watch: TreeWatch, since_ns: int | None = None) -> bytes | None:
    """`watch_stats.signatures` of what `watch` names: what the no-op record keeps and compares. Runs no process."""
    return signatures(watch.root, watch.paths, watch.optional, since_ns)


def _config_files(top: str, listing: str) -> list[str]:
    """Every config file git read (`--show-origin`), the global ones it would read, and the excludes and
    attributes files the config names (or git's defaults)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [os.path.join(xdg, "git", "config"), os.path.join(home, ".gitconfig"), "/etc/gitconfig",
             os.path.join(xdg, "git", "ignore"), os.path.join(xdg, "git", "attributes")]
    items = listing.split("\0")
    for origin, item in zip(items[::2], items[1::2]):
        source = os.path.join(top, origin[len("file:"):]) if origin.startswith("file:") else None
        if source:
            files.append(source)
        name, _nl, value = item.partition("\n")
        name = name.lower()
        if not value:
            continue
        if name in ("core.excludesfile", "core.attributesfile"):
            files.append(os.path.join(top, os.path.expanduser(value)))
        elif name.startswith(("include.", "includeif.")) and name.endswith(".path") and source:
            # an included file, relative to the file that includes it; read only if it exists (so watched)
            files.append(os.path.join(os.path.dirname(source), os.path.expanduser(value)))
    return files


def _git(cwd: str, *args: str) -> str | None:
    """git's output, or None when it fails, times out or cannot start."""
    try:
        out = run(["git", *args], cwd=cwd, timeout=GIT_TIMEOUT_S, head=_LISTING_BYTES, tail=0)
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return out.stdout
