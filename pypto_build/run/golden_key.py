"""What golden.py's result depends on, and whether a kept result still holds — without running golden.py or
importing torch.

One key serves the kept golden result (`run/golden_cache.py`, in the child process) and the verdict made
against it (`run.checks.VerdictCheck`, when `validate` decides whether to run), through the one function
`stale`: `validate` and `replay --validate` cannot disagree about it. The key:

* files: every regular file of the sub-build that is neither ours nor generated (`tree`: golden.py, its
  data folders, files beside it, helper modules; however golden.py reads them — `torch.from_file` reads
  in C++, where no audit hook sees it), every other file golden.py was seen reading (`read`: a helper
  module elsewhere, a file outside the directory), and the target of every symbolic link to a directory
  in the tree (not followed). A file that appears later is a change;
* the environment variables golden.py read through `os.environ` / `os.getenv` (a digest of each value);
* the interpreter's version and the versions of torch and of the distributions golden.py imported,
  as `importlib.metadata` finds them: looked up again only when `sys.path` or the stat of one of its
  directories moved (asking importlib.metadata costs ~10 ms, on every `validate` that does nothing);
* the parameters golden.py is called with.

Files are FileStates (stat first, content decides, `racy`'s rule). The index (`golden.json`) carries a
`seal`: the digest of its own content, so an edited entry (a tolerance, a digest) is a miss, never a pass.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..core.confine import inside
from ..core.filestate import State, digest_of, is_modified, make_state, refreshed
from ..core.hashing import text_digest
from ..core.limits import read_capped
from ..builddir.markers import (CACHE_DIR, DEBUG_DIR, DFX_OUTPUTS, KERNEL_CONFIG, KERNELS_DIR, NEXT_LEVELS,
                                ORCHESTRATION_DIR, PASSES_DUMP_DIR, PTOAS_DIR, PTOAS_PASSES_DIR, REPORT_DIR)
from ..builddir.state_dir import GOLDEN, STATE_DIR
from ..core.racy import changed_since

FORMAT = 3
FOLDER = f"{STATE_DIR}/{GOLDEN}"
INDEX = "golden.json"
DATA = "golden.pt"
DATA_KEY = f"{FOLDER}/{DATA}"           # golden.pt's state among a verdict's refreshed states

INPUT_PARAMS = {"name": "Default"}      # what generate_inputs is called with (PyPTO's replay and runner)
GOLDEN_PARAMS: dict = {}                # what compute_golden is called with (PyPTO's replay)

# Not golden.py's inputs: ours and the build's (state, binaries, stamps, DFX and run outputs), and the program
# the build compiles (kernels, orchestration, .pto units, other sub-builds) — the verdict depends on those
# through the binaries. Directories at the top of the sub-build, then at any depth; files at the top.
GENERATED_DIRS = frozenset({STATE_DIR, CACHE_DIR, KERNELS_DIR, ORCHESTRATION_DIR, PTOAS_DIR, PTOAS_PASSES_DIR,
                            NEXT_LEVELS, DFX_OUTPUTS, PASSES_DUMP_DIR, REPORT_DIR, DEBUG_DIR})
ANYWHERE_DIRS = frozenset({"__pycache__", ".git"})
GENERATED_FILES = frozenset({KERNEL_CONFIG, "compile_commands.json"})


def params() -> dict:
    return {"inputs": INPUT_PARAMS, "golden": GOLDEN_PARAMS}


# --- the sub-build's own files -------------------------------------------------------------------------------


def tree(sub: Path) -> tuple[list[str], dict[str, str]]:
    """The sub-build's files that key golden.py's result (paths relative to it, sorted), and its symbolic links
    to directories (path -> target; not followed: one to `/` must not make us read the disk)."""
    files: list[str] = []
    links: dict[str, str] = {}
    top = os.fspath(sub)

    def walk(folder: str, rel: str) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            path = f"{rel}{entry.name}"
            try:
                if entry.is_dir():
                    if entry.name in ANYWHERE_DIRS or (not rel and entry.name in GENERATED_DIRS):
                        continue
                    if entry.is_symlink():
                        links[path] = os.readlink(entry.path)
                    else:
                        walk(entry.path, f"{path}/")
                elif entry.is_file() and not (not rel and entry.name in GENERATED_FILES):
                    files.append(path)      # a regular file or a link to one; never a FIFO or device
            except OSError:
                continue

    walk(top, "")
    return sorted(files), dict(sorted(links.items()))


def snapshot(sub: Path) -> tuple[dict[str, State], dict[str, str]]:
    """The states of the tree's files now (taken before golden.py runs) and its links."""
    files, links = tree(sub)
    states = {}
    for rel in files:
        try:
            states[rel] = make_state(os.path.join(sub, rel))
        except OSError:
            continue                        # gone since the listing: the next lookup says so
    return states, links


def key_of(sub: Path, path: str) -> str:
    """A file's key: relative to the sub-build inside it (a copied directory keeps its entry), else absolute."""
    root = os.path.realpath(sub)
    real = os.path.realpath(path)
    return Path(os.path.relpath(real, root)).as_posix() if inside(real, root) else real


def path_of(sub: Path, key: str) -> str:
    return key if os.path.isabs(key) else os.path.join(sub, key)


# --- versions ------------------------------------------------------------------------------------------------


def versions(dists) -> dict[str, str | None]:
    """torch's version and those of `dists`, as importlib.metadata finds them (None: not installed)."""
    from importlib import metadata

    found: dict[str, str | None] = {}
    for dist in sorted({"torch", *dists}):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def path_signature() -> list | None:
    """sys.path with the stat of each of its entries: while it is the same, importlib.metadata finds the same
    distributions (it lists these directories). None when one changed too recently to be trusted by stat."""
    now = time.time_ns()
    signature = []
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
        except OSError:
            signature.append([entry, None])
            continue
        if changed_since(st, now):
            return None
        signature.append([entry, [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]])
    return signature


def python_version() -> str:
    """The interpreter's version (`platform.python_version()`, without importing `platform`)."""
    return sys.version.split()[0]


def environ_digest(value: str | None) -> str | None:
    """What the key keeps of an environment variable's value: its digest (values may be secrets), or None."""
    return None if value is None else text_digest(value)


# --- the index -----------------------------------------------------------------------------------------------


def seal(index: dict) -> str:
    """The digest of everything in `index` but its seal."""
    body = {k: v for k, v in index.items() if k != "seal"}
    return text_digest(json.dumps(body, sort_keys=True, separators=(",", ":")))


def load(sub: Path) -> tuple[dict | None, str | None]:
    """The sub-build's index if it is whole and unedited, else (None, why not; None when none is kept)."""
    try:
        raw = read_capped(Path(sub) / FOLDER / INDEX)
    except FileNotFoundError:
        return None, None
    except Exception as exc:            # noqa: BLE001 - a damaged entry is a miss, never a failure
        return None, f"the cached entry is unreadable ({type(exc).__name__})"
    try:
        index = json.loads(raw)
    except ValueError:
        return None, "the cached entry is unreadable (not JSON)"
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        return None, "the cached entry has another format"
    if index.get("seal") != seal(index):
        return None, "the cached entry was edited"
    return index, None


def stale(sub: Path, index: dict, known: dict | None = None) -> str | None:
    """Why the kept result no longer holds, or None. `known`: newer states of the same content (a verdict's
    refreshed states, so a copied directory is hashed once); used only where they carry the index's digest."""
    try:
        return _stale(Path(sub), index, known or {})
    except (KeyError, TypeError, ValueError, AttributeError):
        return "the cached entry is unreadable (its fields do not fit together)"


def _stale(sub: Path, index: dict, known: dict) -> str | None:
    if index["params"] != params():
        return "the parameters golden.py is called with changed"
    if index["python"] != python_version():
        return f"Python {index['python']} -> {python_version()}"
    if index["paths"] is None or index["paths"] != path_signature():
        now = versions(index["packages"])
        for dist, version in index["packages"].items():
            if now.get(dist) != version:
                return f"{dist} {version or 'none'} -> {now.get(dist) or 'none'}"
    for name, seen in index["environ"].items():
        if environ_digest(os.environ.get(name)) != seen:
            return f"environment variable {name} changed"
    read = set(index["read"])
    for key, saved in index["files"].items():
        why = _file_moved(path_of(sub, key), _state(key, saved, known))
        if why:
            return f"{key}, which golden.py read, {'changed' if why == 'changed' else 'is gone'}" if key in read \
                else f"{key} {'changed' if why == 'changed' else 'was removed'}"
    files, links = tree(sub)
    for rel in files:
        if rel not in index["files"]:
            return f"{rel} is new"
    if links != index["links"]:
        changed = sorted(set(links.items()) ^ set(index["links"].items()))
        return f"the link {changed[0][0]} changed"
    return None


def data_changed(sub: Path, index: dict, known: dict | None = None) -> bool:
    """Whether golden.pt no longer holds what its index names (stat first, with `known`'s state of it)."""
    return _data_state(sub, index, known or {}) is None


def refreshed_states(sub: Path, index: dict, known: dict | None = None) -> dict | None:
    """States of the index's files and golden.pt for the next check: re-stat'ed where the stat moved and the
    content did not (after a copy or a touch); None when they are the `known` ones."""
    known = known or {}
    new: dict[str, State] = {}
    for key, saved in index["files"].items():
        path, state = path_of(sub, key), _state(key, saved, known)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not _modified(path, st, state):
            new[key] = _refreshed(path, st, state)
    data = _data_state(sub, index, known)
    if data is not None:
        new[DATA_KEY] = data
    return None if new == known else new


def _data_state(sub: Path, index: dict, known: dict) -> State | None:
    """golden.pt's state when it holds the digest its index names, else None."""
    path = os.path.join(sub, DATA_KEY)
    try:
        st = os.stat(path)
    except OSError:
        return None
    saved = known.get(DATA_KEY)
    if digest_of(saved) == index.get("data") and not _modified(path, st, saved):
        return _refreshed(path, st, saved)
    try:
        state = make_state(path, st)
    except OSError:
        return None
    return state if digest_of(state) == index.get("data") else None


def _refreshed(path: str, st: os.stat_result, state: State) -> State:
    try:
        return refreshed(path, st, state) or state
    except OSError:
        return state


def _state(key: str, saved: State, known: dict) -> State:
    newer = known.get(key)
    return newer if newer is not None and digest_of(newer) is not None and digest_of(newer) == digest_of(saved) \
        else saved


def _file_moved(path: str, state: State) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return "gone"
    return "changed" if _modified(path, st, state) else None


def _modified(path: str, st: os.stat_result, state: State) -> bool:
    """`is_modified`, with a file that cannot be read (permissions, I/O) counted as changed."""
    try:
        return is_modified(path, st, state)
    except OSError:
        return True
