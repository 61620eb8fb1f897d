"""The `pypto-build` console script (and `python -m pypto_build`): `start()`.

A plain `pypto-build build [-q] [-j N] [-k] DIR` that the no-op record answers (plan/noop_record.quick:
exactly when the full path would) is answered here, before argparse, the option table, dataclasses or
json load — a no-op of a large directory is then mostly interpreter start-up and stats. Everything
else, and every case the record does not answer, is `main.entry()`. This module imports only `gc`, `os`,
`sys`, core/pipes and noop_record.
"""
from __future__ import annotations

import gc
import os
import sys

from ..core import pipes

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: `typing` would cost the quick answer's start
    from typing import NoReturn

QUIET = ("-q", "--quiet")
INERT = ("-k", "--keep-going", "--debug")     # change nothing a no-op decides or says
GC_EVERY = 50_000          # allocations between two collections in `pypto-build`'s own process (start)


def start() -> NoReturn:
    """The record's answer, else `main.entry()`; then `leave`.

    The garbage collector runs every 50 000 allocations instead of 700, from the first import on: a run
    loads some 10^5 objects that live as long as it does (the modules of doit and ours) and makes little
    garbage, and the default rhythm traverses them again and again (~13 ms of a one-edit rebuild, a
    third of it while the modules load). This process only, never a library caller's.
    """
    gc.set_threshold(GC_EVERY)
    pipes.guard()          # a reader that closes our output stops nothing (core/pipes.py)
    if answered(sys.argv[1:]) is None:
        from .main import entry
        leave(entry())
    leave(0)


def leave(code: object) -> NoReturn:
    """Exit with `code` without the interpreter's teardown.

    Everything a run writes is closed by then (atomic writes, the state committed and closed, the lock
    released, every program it started reaped); what finalisation would still do is free every module's
    objects one by one — ~10 ms after a one-edit rebuild, ~2 ms after a quick answer. Output is flushed
    first (a reader that closed it was met quietly: `pipes.guard`); if that still fails, Python's usual exit
    reports it. Under a profiler or tracer
    (`python -m cProfile -m pypto_build`, coverage) the usual exit runs, so they can write what they collected.
    """
    if not isinstance(code, int) or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:       # noqa: BLE001 — the normal exit says what went wrong with the stream
        sys.exit(code)
    os._exit(code)


def answered(argv: list[str]) -> int | None:
    """0 after printing the record's answer when `argv` is a plain build the record answers, else None."""
    plain = plain_build(argv)
    if plain is None:
        return None
    from ..plan.noop_record import quick, said
    record = quick(plain[0])
    if record is None:
        return None
    if not plain[1]:
        sys.stdout.write("".join(f"{line}\n" for line in said(record)))
    return 0


def plain_build(argv: list[str]) -> tuple[str, bool] | None:
    """(DIR, quiet) when `argv` is `build`, one DIR and only options that change nothing a no-op decides
    or says (-q, -j N, -k, --debug), each spelled as the parser reads it; else None (main parses it)."""
    words = list(argv)
    while words and words[0] == "--debug":
        words.pop(0)
    if not words or words[0] != "build":
        return None
    dirs, quiet, rest = [], False, iter(words[1:])
    for word in rest:
        if word in QUIET:
            quiet = True
        elif word in INERT:
            pass
        elif word in ("-j", "--jobs"):
            if not _count(next(rest, "")):
                return None
        elif word.startswith(("--jobs=", "-j")):
            if not _count(word[7:] if word.startswith("--jobs=") else word[2:]):
                return None
        elif word.startswith("-") or not word:
            return None
        else:
            dirs.append(word)
    return (dirs[0], quiet) if len(dirs) == 1 else None


def _count(word: str) -> bool:
    """A -j value the parser takes and the range check accepts (1 or more, ASCII digits only)."""
    return word.isascii() and word.isdigit() and int(word) >= 1
