"""The no-op record on disk, and the answer the `pypto-build` console script reads from it before anything loads.

`noop.record` writes `.pypto_build/noop.marshal` after a full clean build; `noop.check` (the pipeline)
and `quick` (cli/quick.py, before argparse, dataclasses, json or subprocess load) read it here. marshal:
one read and no parser to import. It is one installation's private state: a record of another FORMAT
or Python, or one that does not load, is "not a no-op", never an answer. This module imports only
`os`, `sys`, `marshal`, `select`, `stat` and `time` (and light ones of ours: `watch_stats`, `which`,
`errors`, `compile_env`, and the platforms' records with a platform's `noop_key` module when it answers).

The record holds the stat signature of every path the decision read (`paths`, `sigs`: `unchanged`; the
programs the compiler's driver runs and the directories it and PATH found them by among them) and,
for each git checkout whose clean HEAD is an identity (`trees`), the watch `git_watch` took of it — its
root, its watched paths, git's own files and their `lstat` signatures then — which both readers compare
with `trees_unchanged` (`watch_stats.unchanged`: one function for both; the quick answer's in two processes).

Besides what it compares, the record keeps what a run it answers reports: the task names, the lines, and
the programs the plan found (`runs`: each one's directory and layout kind, `plan.program`), so a
`BuildResult` the record answered hands the run stage its programs as a planned one does.

`quick` answers only where the full path would answer the same. Besides the stats and the key, the record
holds what a plain `build DIR` decides from (its `quick` part, written only when a plain request under that
environment takes this run's platform and `.pto` settings with no launcher to find and is refused
nothing, `noop.plain`): the root, the package, the user, the environment variables the decision
reads (`PYPTO*`, `PTO*`, `CXX*`, `GIT_*`, `PATH`, `HOME`, `XDG_CONFIG_HOME`, and those the compiler reads,
`compile_env.COMPILE_ENV`: `CPATH`, `COMPILER_PATH`, ...), the platform and where it
finds what its key names (`noop_keys`: `PTO_ISA_ROOT` resolved on host; simpler's install and PTO-ISA tree
on a2a3sim / a5sim), each compiler it probes as PATH resolves it through every link with its `--version`
text, ptoas as PATH resolves it, and whether the recorded platform can serve here (its record's `unserved`:
simpler importable, for a simulator) when the platform choice depends on it. All of it is compared again and each `--version` is run again (started before the git trees are
compared, so the two overlap); any difference falls back to the full path, which decides by content.

Neither reader answers where the full path refuses. `noop.check` makes the full path's refusals first, by
the same functions (`noop.refuse`: the settings, the state folder's links, the lock and the state database).
`quick` needs none of them: its part is written only when a plain request under that environment passes
`noop.refuse`, and it answers only under that same environment (so its settings are judged alike); the
state folder is opened without following a link, the record read through that descriptor (never through a
link), and its top must hold only regular files and the folders the record names (`plain_state`), each of
them and every folder below, with the state database, compared by stat with the rest (`paths`). Anything
else — a link, a FIFO, a folder named `lock` — returns None: the full path refuses it in its own line.
"""
from __future__ import annotations

import marshal
import os
import select
import stat
import sys
import time

from ..builddir.state_dir import STATE_DIR
from ..core.which import which
from ..toolchain.compile_env import COMPILE_ENV
from ..errors import UserError
from ..toolchain.watch_stats import unchanged as unchanged_trees
from . import invalidation

NAME = "noop.marshal"
FORMAT = 5
ENV_PREFIXES = ("PYPTO", "PTO", "CXX", "GIT_")      # with ENV_NAMES: every variable a plain build's decision
ENV_NAMES = ("PATH", "HOME", "XDG_CONFIG_HOME",     # reads (HOME, XDG_CONFIG_HOME and GIT_*: where git's config
             *COMPILE_ENV)                          # is; COMPILE_ENV: what the compiler reads, in its identity)
VERSION_TIMEOUT_S = 10.0    # a `--version` that outlasts it: the full path asks again, under its own deadline
VERSION_CAP = 1 << 16       # more than this on stdout is not a `--version` text: the full path decides
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def path(root: str | os.PathLike) -> str:
    return os.path.join(root, STATE_DIR, NAME)


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What the record keeps of a path's stat and `unchanged` compares: (mtime, size, inode, ctime)."""
    return st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns


def encode(fields: dict) -> bytes:
    """The record's bytes: `fields` with this FORMAT and this Python's version."""
    return marshal.dumps({"format": FORMAT, "python": sys.hexversion, **fields})


def load(root: str | os.PathLike, state: int | None = None) -> dict | None:
    """`root`'s record (`state`: its state folder's open descriptor, then `root` is unused) when this FORMAT and
    this Python wrote it, else None. Only a regular file is read, never through a link (opened without blocking
    or following one, its type checked on the descriptor: a FIFO in its place is no record)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path(root), flags) if state is None else os.open(NAME, flags, dir_fd=state)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        record = marshal.loads(b"".join(chunks))
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        os.close(fd)
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("python") != sys.hexversion:
        return None
    return record


def unchanged(root: str | os.PathLike, record: dict) -> bool:
    """Whether every path the record names (relative ones under `root`) has the stat signature it recorded."""
    try:
        paths, sigs = record["paths"], record["sigs"]
        if len(paths) != len(sigs):
            return False
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, KeyError, TypeError):
        return False
    try:
        for name, sig in zip(paths, sigs):
            if signature(os.stat(name, dir_fd=fd)) != sig:     # an absolute name ignores dir_fd
                return False
        return True
    except (OSError, ValueError, TypeError):
        return False
    finally:
        os.close(fd)


def trees_unchanged(record: dict, *, split: bool = False) -> bool:
    """Whether every git checkout the record watches (`noop.record`: root, its watched paths, git's own files,
    their signatures then) has the same signatures now (`watch_stats.unchanged`; `split`: in two processes)."""
    try:
        return unchanged_trees(record.get("trees", ()), split=split)
    except (ValueError, TypeError):
        return False


def said(record: dict) -> list[str]:
    """What a run the record answers prints (unless -q): the recorded lines, then the summary."""
    return [*record.get("lines", ()), f"pypto-build: 0 compiled, {record.get('current', 0)} up to date"]


def environment(env: os._Environ | dict) -> dict[str, str]:
    """The variables a plain build's decision reads (the quick part compares them all): those the key names
    (the compiler's, `COMPILE_ENV`, among them), with every `PYPTO*`, `PTO*` and `CXX*` one."""
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def user() -> list:
    """Who runs: `which` answers by this user's access."""
    return [os.getuid(), os.getgid(), sorted(os.getgroups())]


def quick(directory: str) -> dict | None:
    """The record when a plain `pypto-build build DIR` (`directory`) would be answered by it, else None.

    Exactly the full path's decision, or None: see the module docstring. Cheapest comparisons first, the
    git trees' stats last, the compilers' `--version` running meanwhile (read only when the trees matched).
    """
    try:
        root = os.path.realpath(directory)
        state = os.open(os.path.join(root, STATE_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None             # no state folder, or a link: the full path judges it
    try:
        record = load(root, state)
        plain = record.get("quick") if record else None
        if not plain or not plain_state(state, plain["state_dirs"]):
            return None
    except (OSError, KeyError, TypeError):
        return None
    finally:
        os.close(state)
    try:
        env = os.environ
        if (plain["root"] != root or plain["package"] != PACKAGE or plain["user"] != user()
                or plain["env"] != environment(env) or invalidation.pending(root) is not None
                or not unchanged(root, record)):
            return None
        search = env.get("PATH")
        for named, exe, _said in plain["compilers"]:
            found = which(named, path=search)
            if found is None or os.path.realpath(found) != exe:
                return None
        try:                                    # as `pto.find_ptoas` looks it up (PTOAS_ROOT is unset here)
            ptoas = which("ptoas", path=env.get("PATH", os.defpath))
        except (OSError, ValueError):
            ptoas = None
        if (os.path.realpath(os.path.abspath(ptoas)) if ptoas else None) != plain["ptoas"]:
            return None
        if plain["unserved"] is not None:       # the platform choice depends on it (records.cannot_serve)
            from ..platforms import cannot_serve
            recorded, unserved = plain["unserved"]
            if (cannot_serve(recorded) is not None) != unserved:
                return None
        from ..platforms import key_module
        module = key_module(plain["platform"])         # where the platform finds what its key names
        if module is None or module.places(env) != plain["places"]:
            return None
        started: list[tuple[int, int, float] | None] = []      # running while the git trees are compared;
        same = False                                            # ended and reaped whatever happens
        try:
            for _named, exe, _said in plain["compilers"]:
                started.append(start_version(exe))
            same = trees_unchanged(record, split=True)
        finally:
            texts = [finish_version(run, read=same) for run in started]
        return record if same and texts == [text for _named, _exe, text in plain["compilers"]] else None
    except (OSError, ValueError, KeyError, TypeError, ImportError, UserError):
        return None         # ImportError, UserError: simpler's install cannot be looked up (the full path says why)


def plain_state(state: int, dirs: list[str]) -> bool:
    """Whether the state folder (`state`, opened without following a link) holds at its top only regular files
    and the folders `dirs` the record names: no link, FIFO or device, no folder it did not see. Each of those
    folders, and every one below them, is in the record's `paths` (`noop.state_dirs`): an entry added, removed
    or replaced in one changes its signature, so the record was written over a state folder of folders and
    regular files only, which stays so while the stats match."""
    with os.scandir(state) as entries:
        for entry in entries:
            if not (entry.is_file(follow_symlinks=False) or entry.is_dir(follow_symlinks=False)
                    and entry.name in dirs):
                return False
    return True


def start_version(exe: str) -> tuple[int, int, float] | None:
    """`exe --version` started (its pid, the read end of its stdout, its deadline) for `finish_version`, as
    `probe_compiler` runs it: stdin /dev/null, a session of its own. None when it cannot start. Started with
    `posix_spawn` (`subprocess` would cost more than the run); the quick answer starts the compilers' before
    it compares the git trees, so the two overlap."""
    r, w = os.pipe()
    try:
        pid = os.posix_spawn(exe, [exe, "--version"], os.environ, setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, w, 1),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    except OSError:
        os.close(r)
        return None
    finally:
        os.close(w)
    return pid, r, time.monotonic() + VERSION_TIMEOUT_S


def finish_version(started: tuple[int, int, float] | None, *, read: bool = True) -> str | None:
    """A `start_version` program's stdout, stripped, as `probe_compiler` reads it (UTF-8 with replacement;
    stdout only, so a compiler that prints its version on stderr never matches the record and the full path
    answers); None when it did not start, printed nothing or more than VERSION_CAP, or outlasted
    VERSION_TIMEOUT_S. The program is then ended (its group killed) and reaped; `read=False`: at once, unread."""
    if started is None:
        return None
    pid, r, deadline = started
    chunks, size, ended = [], 0, False
    try:
        poller = select.poll()
        poller.register(r, select.POLLIN)
        while read and size <= VERSION_CAP:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                break
            chunk = os.read(r, VERSION_CAP)
            if not chunk:
                ended = True
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(r)
        try:
            os.killpg(pid, 9)       # SIGKILL to its group, as procs.run ends every program (`signal` loads enum)
        except OSError:
            pass
        os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", errors="replace").strip() if ended else ""
    return text or None
