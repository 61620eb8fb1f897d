"""Where a bisect works: a copy of the build directory, never the directory itself, one bisect per directory at a time.

The work folder of a directory is `<bisect>/<digest of its path>/` beside the kept variants' store
(`variants.store.store_dir`: `<cache dir>/bisect`, else `$XDG_CACHE_HOME/pypto_build/bisect`). Under its flock
(`engine.dir_lock`, as builds: a second bisect of the same directory waits, and the kernel releases the lock of a
killed one) whatever a killed bisect left is removed first; then `scratch/` is a copy of the directory with its
build state, and `binaries/` holds the binaries of both variants by digest, which `install` puts in place for
each run. Nothing is ever written into the user's directory; the work folder goes when the bisect ends, but for
the good variants' dumps kept for the next trace (`kept-dumps/`, a few, `traced`).
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

from ..builddir.markers import DFX_OUTPUTS
from ..builddir.state_dir import REPLAY, STATE_DIR
from ..core.hashing import text_digest
from ..variants.store import store_dir

KEPT_DUMPS = "kept-dumps"
_OURS = ("lock", KEPT_DUMPS)            # what a bisect's end (or the next one) leaves in the work folder
_LEFT_OUT = {(STATE_DIR, REPLAY)}       # the user's last outputs: a run in the copy makes its own


def work_dir(root: Path, cache_dir: str | None) -> Path:
    """The work folder of bisects of `root`."""
    base = Path(store_dir(cache_dir)).parent / "bisect"
    return base / text_digest(str(Path(root).resolve()))[:16]


class Scratch:
    """The copy a bisect runs in (`path`: the copied build root) and the binaries it mixes (`keep`, `install`)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.path = work / "scratch"
        self.binaries = work / "binaries"
        self.kept_dumps = work / KEPT_DUMPS          # outlives the bisect (`traced`)

    def keep(self, digest: str, source: Path) -> Path:
        """Copy the binary `source` (of content `digest`) aside, once; its kept path."""
        kept = self.binaries / digest
        if not kept.exists():
            self.binaries.mkdir(parents=True, exist_ok=True)
            tmp = kept.with_name(kept.name + ".tmp")
            shutil.copy2(source, tmp)
            os.replace(tmp, kept)
        return kept

    def kept(self, digest: str) -> Path:
        return self.binaries / digest

    def install(self, target: Path, digest: str) -> None:
        """Put the kept binary `digest` at `target` in the copy (atomically; the copy's file only)."""
        tmp = target.with_name(f".{target.name}.bisect.tmp")
        shutil.copy2(self.kept(digest), tmp)
        os.replace(tmp, target)


@contextlib.contextmanager
def scratch(root: Path, cache_dir: str | None) -> Iterator[Scratch]:
    """A fresh copy of `root` to work in, under the directory's bisect lock; removed when the block ends."""
    from ..engine import dir_lock

    work = work_dir(root, cache_dir)
    work.mkdir(parents=True, exist_ok=True)
    with dir_lock(work):
        for entry in os.scandir(work):                  # what a killed bisect left
            if entry.name not in _OURS:
                _remove(Path(entry.path))
        made = Scratch(work)
        try:
            shutil.copytree(root, made.path, symlinks=True, ignore=_ignore(Path(root)))
            yield made
        finally:
            for entry in os.scandir(work):
                if entry.name not in _OURS:
                    _remove(Path(entry.path))


def _ignore(root: Path):
    """What the copy leaves out: the last outputs and diagnostics of the user's runs."""
    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(root).parts
        left = {n for n in names if (*rel, n)[-2:] in _LEFT_OUT or n == DFX_OUTPUTS or n.startswith(".replay.")}
        return left
    return ignore


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
