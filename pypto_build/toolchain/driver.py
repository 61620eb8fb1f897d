"""What the compiler driver runs and reads besides its own binary: part of every compile key (`keyed`).

`g++ ... -o k.so k.cpp` runs cc1plus, as and collect2, which runs ld. The driver looks each up
itself — its `-B` prefixes, `$GCC_EXEC_PREFIX`, `$COMPILER_PATH`, its own libexec directories —
and runs a name it did not find there (`as`, `ld` on Debian) from `$PATH`. `g++ -print-prog-name=NAME`
says what that lookup finds (a path, or the bare name), so each program is asked of the driver with
the compile's words and `$CXXFLAGS` (`-B`, `-fuse-ld=` change the answer), a bare answer is looked up
on `$PATH` as the driver's exec does, and the file found is digested by content. With the variables
of `compile_env.COMPILE_ENV` that are set, that is what `keyed` adds to `Compiler.identity`: another
`as` earlier on PATH, a `$COMPILER_PATH`, a changed assembler, a switched `$CPATH` each give another key.

Asking costs five programs (`-print-search-dirs` and four `-print-prog-name`), so the answer is kept
per process and between runs in `search_dirs.json` (`search_dirs`, under the compiler's identity,
words, flags and environment), watched by the stat of what it rests on: each program file, each
directory the driver searches (`-print-search-dirs`' `programs:`) and each `$PATH` directory up to the
one a bare name was found in (for one that does not exist, its nearest existing ancestor). A program
created in any of them changes that directory, so the answer is asked again; the stats only stand for
a decision made by content (the programs' digests, memoised on their stat: `hashing`). The no-op
record compares the same paths (`Compiler.watch`).

Not covered: the files the link reads besides its programs (crt*.o, libstdc++, libgcc — they come
with the compiler's packages, whose `--version` changes with them) and ld's linker plugin.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace

from . import search_dirs
from .compile_env import env_part
from .compiler import VERSION_TIMEOUT_S, Compiler
from ..core.hashing import file_digest, text_digest
from ..core.procs import run
from ..core.which import which
from ..errors import ToolchainError

PROGRAMS = ("cc1plus", "as", "collect2", "ld")      # what `g++ -shared -o x.so x.cpp` runs (collect2 runs ld)
UNKNOWN = "?"       # the driver did not answer (not GCC-like: a stand-in, a wrapper refusing the option)

_answers: dict[str, tuple[tuple[str, ...], dict[str, list[int]]]] = {}   # key -> (programs, watched: signature)


def keyed(compiler: Compiler, cxxflags: tuple[str, ...] = (), env: Mapping[str, str] | None = None) -> Compiler:
    """`compiler` with an identity that also covers the environment it reads and the programs its driver runs
    (each by its resolved path and content), and the paths those were found by (`watch`).

    `cxxflags`: what every compile adds after the compiler's words (`$CXXFLAGS`).
    """
    env = os.environ if env is None else env
    found, watch = programs(compiler, cxxflags, env)
    parts = [compiler.identity, *env_part(env)]
    for name, path in zip(PROGRAMS, found):
        parts.append(f"{name}={path}\0{_content(path)}")
    return replace(compiler, identity=text_digest(*parts), watch=tuple(watch))


def programs(compiler: Compiler, cxxflags: tuple[str, ...], env: Mapping[str, str]) \
        -> tuple[tuple[str, ...], dict[str, list[int]]]:
    """Each of PROGRAMS as the driver runs it (its resolved path; "" when nothing by that name is found,
    UNKNOWN when the driver did not say), and the existing paths that answer rests on, with their signatures.

    Asked once per compiler identity, words, flags and environment, and reused — in this process and by
    later runs (`search_dirs`) — while every path it rests on keeps its stat signature.
    """
    key = search_dirs.key(compiler.identity, compiler.command, cxxflags, env, what="driver programs")
    known = _answers.get(key)
    if known is not None and all(search_dirs.signature(p) == sig for p, sig in known[1].items()):
        return known
    found = search_dirs.recorded(key, gaps=True)
    if found is not None and len(found) == len(PROGRAMS):
        known = found, search_dirs.watched(key)
    else:
        since_ns = time.time_ns()
        found, named = _ask(compiler, cxxflags, env)
        # an answer the driver did not give is asked again every run (never kept, never trusted by stat)
        known = (found, search_dirs.probed(key, found, named, since_ns) if UNKNOWN not in found else {})
    if search_dirs.kept(key):       # not one that may have changed unseen while it was asked (`probed`)
        _answers[key] = known
    return known


def _ask(compiler: Compiler, cxxflags: tuple[str, ...], env: Mapping[str, str]) \
        -> tuple[tuple[str, ...], list[str]]:
    """Ask the driver: each program's resolved path ("" not found, UNKNOWN no answer) and every absolute
    path the answer rests on (the directories searched, the files found)."""
    words = [*compiler.command, *cxxflags]
    named = _search_dirs(_said([*words, "-print-search-dirs"], compiler, env))
    search = env.get("PATH")
    found: list[str] = []
    for name in PROGRAMS:
        said = _said([*words, f"-print-prog-name={name}"], compiler, env)
        if said is None or not said or "\n" in said:
            found.append(UNKNOWN)
            continue
        if "/" in said:                     # found where the driver looks first
            path: str | None = os.path.abspath(said)
        else:                               # run by that name from $PATH (execvp), as which() finds it
            path = which(said, path=search)
            named += _path_dirs(search, said, path)
        if path is not None:
            named.append(path)
        found.append(os.path.realpath(path) if path else "")
    return tuple(found), [p for p in dict.fromkeys(named) if os.path.isabs(p)]


def _said(argv: list[str], compiler: Compiler, env: Mapping[str, str]) -> str | None:
    """The driver's stdout, stripped, when it succeeded; None when it refused."""
    try:
        out = run(argv, timeout=VERSION_TIMEOUT_S, env={**env, "LC_ALL": "C"})     # `programs:` untranslated
    except OSError as exc:
        raise ToolchainError(f"{compiler.path}: cannot run '{argv[-1]}' ({exc}); check $CXX") from None
    if out.timed_out:
        raise ToolchainError(f"{compiler.path}: '{argv[-1]}' did not finish within {VERSION_TIMEOUT_S:g} s "
                             "(killed); check $CXX")
    return out.stdout.strip() if out.returncode == 0 else None


def _search_dirs(said: str | None) -> list[str]:
    """The `programs: =dir:dir...` line of `-print-search-dirs`: where the driver looks for its programs."""
    for line in (said or "").splitlines():
        if line.startswith("programs: ="):
            return [d.rstrip("/") or "/" for d in line[len("programs: ="):].split(os.pathsep) if d]
    return []


def _path_dirs(search: str | None, name: str, found: str | None) -> list[str]:
    """The `$PATH` directories `name` was looked up in (`which`): up to the one it was found in, else all."""
    dirs: list[str] = []
    for folder in (search or "").split(os.pathsep):
        dirs.append(folder)
        if found is not None and os.path.join(folder, name) == found:
            break
    return dirs


def _content(path: str) -> str:
    """What stands for a program's content in the identity: its digest ("-" none found, UNKNOWN not asked);
    its stat signature when it can be run but not read (a change then still changes the key)."""
    if path in ("", UNKNOWN):
        return path or "-"
    try:
        return file_digest(path)
    except OSError:
        return f"unreadable {search_dirs.signature(path)}"
