"""The compiler's answers about itself, kept between runs in `.pypto_build/search_dirs.json`: its include
search directories, and the programs its driver runs (`driver`: kept the same way, with the program
files and the directories searched for them as the watched paths).

Asking the compiler (`-x c++ -E -v`, `compiler.system_include_dirs`) starts cc1plus: about
10 ms of every run, a fifth of a one-edit rebuild's own work. The answer depends on the
compiler (its identity: resolved path, binary digest, `--version`), its extra words and
`$CXXFLAGS`, the environment variables compilers read for include paths (`ENV`), and which of
the directories the compiler considers exist. So the record keeps, under a digest of the
first three (`key`), the answer and the stat signature of every directory the compiler's
output names — those it lists, those it ignores as nonexistent or duplicate, the GCC
installations clang weighs — and, for one that does not exist, of its nearest existing
ancestor (creating it changes that directory). An answer is reused only while every one of
those signatures is unchanged; a signature that may still change unseen (its ctime within the
racy window of the probe, `racy.changed_since`) is never recorded. Nothing here decides by
mtime alone: a signature is (mtime, size, inode, ctime), compared for equality.

Planning reads the record (`load`, never writes: explain and --dry-run stay read-only); a
build writes what it asked or reused (`save`, under the directory lock, atomically), like the
no-op record. A missing, damaged or stale record only means asking again.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..core import atomic, safeio
from ..core.hashing import text_digest
from ..builddir.state_dir import STATE_DIR
from ..core.racy import changed_since

RECORD = "search_dirs.json"
FORMAT = "pypto_build-search-dirs-1"
MAX_ENTRIES = 16    # answers kept per directory (two per compiler and flag set: include dirs, programs)
# What GCC and clang read for include paths or to find their own parts (PATH: a driver may look beside itself).
ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "OBJCPLUS_INCLUDE_PATH",
       "GCC_EXEC_PREFIX", "COMPILER_PATH", "SDKROOT", "CCC_OVERRIDE_OPTIONS", "PATH")

_recorded: dict[str, dict] = {}     # key -> entry, as the last `load` read them (validated when asked)
_used: dict[str, dict] = {}         # key -> entry answered in this process (recorded or probed): `save` keeps them


def key(identity: str, command: tuple[str, ...], cxxflags: tuple[str, ...], env: Mapping[str, str],
        what: str = "include dirs") -> str:
    """What an answer is kept under: the question (`what`: the include directories, or `driver`'s programs),
    the compiler, its words, the flags and the environment it reads."""
    return text_digest(FORMAT, what, identity, *command, "\0", *cxxflags, "\0",
                       *(f"{k}={env.get(k, '')}" for k in ENV))


def signature(path: str) -> list[int] | None:
    """(mtime, size, inode, ctime) of `path` with links followed, or None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]


def load(root: Path) -> None:
    """Read the directory's record (planning: a missing or damaged one is no record)."""
    try:
        data = json.loads(safeio.read_text(Path(root) / STATE_DIR / RECORD))
        entries = data["entries"] if data.get("format") == FORMAT else {}
        _recorded.update({k: e for k, e in entries.items() if _well_formed(e)})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass


def _well_formed(entry: object) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("dirs"), list) and isinstance(entry.get("watch"), dict)
            and all(isinstance(d, str) for d in entry["dirs"]))


def recorded(answer_key: str, *, gaps: bool = False) -> tuple[str, ...] | None:
    """The recorded answer for `answer_key` while every path it watched is as it was, else None.

    The record is data in the build directory: an answer counts only when each of its paths
    is watched (existing, its signature equal to the one recorded), so a record made elsewhere —
    another machine, a hand edit — can never make a directory of this machine an include root.
    `gaps`: an answer may hold "" (`driver`: a program not found), which names no path.
    """
    entry = _recorded.get(answer_key)
    if entry is None or any(not os.path.isabs(p) or signature(p) != s for p, s in entry["watch"].items()):
        return None
    watched = {os.path.realpath(p) for p, s in entry["watch"].items() if s is not None}
    if not all(d in watched for d in entry["dirs"] if d or not gaps):
        return None
    _used[answer_key] = entry
    return tuple(entry["dirs"])


def watched(answer_key: str) -> dict[str, list[int]]:
    """The existing paths the answer this process used for `answer_key` rests on, with their signatures
    (the no-op record compares them too); empty when it used none."""
    entry = _used.get(answer_key)
    return {p: s for p, s in entry["watch"].items() if s is not None} if entry else {}


def kept(answer_key: str) -> bool:
    """Whether this process used an answer for `answer_key` that `save` keeps (recorded, or probed and settled)."""
    return answer_key in _used


def probed(answer_key: str, dirs: tuple[str, ...], named: list[str], since_ns: int) -> dict[str, list[int]]:
    """Keep the answer the compiler just gave (`named`: every absolute path its output named; `since_ns`:
    when it was asked) for `save`, unless a watched path changed too recently to be trusted by stat.
    Returns the existing paths it rests on with their signatures (as `watched`), kept or not."""
    watch: dict[str, list[int] | None] = {}
    racy = False
    for path in named:
        while True:
            try:
                st = os.stat(path)
            except OSError:
                watch[path] = None
                parent = os.path.dirname(path)
                if parent == path:
                    break
                path = parent                   # its nearest existing ancestor: creating it changes that
                continue
            racy = racy or changed_since(st, since_ns)      # may change again unseen: ask next time too
            watch[path] = [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]
            break
    if racy:
        _used.pop(answer_key, None)             # an older answer this process used is no longer the one
    else:
        _used[answer_key] = {"dirs": list(dirs), "watch": watch}
    return {p: s for p, s in watch.items() if s is not None}


def save(root: Path) -> None:
    """Record the answers this process used into the directory (a build, under its lock); quiet on failure
    (the next run asks the compiler again)."""
    if not _used:
        return
    path = Path(root) / STATE_DIR / RECORD
    try:
        data = json.loads(safeio.read_text(path))
        entries = data["entries"] if data.get("format") == FORMAT and isinstance(data.get("entries"), dict) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        entries = {}
    if all(entries.get(k) == e for k, e in _used.items()):
        return
    kept = {**_used, **{k: e for k, e in entries.items() if k not in _used}}
    try:
        atomic.write_text(path, json.dumps({"format": FORMAT, "entries": dict(list(kept.items())[:MAX_ENTRIES])}),
                          sweep=True)
    except OSError:
        pass
