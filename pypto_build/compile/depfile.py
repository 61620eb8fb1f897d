"""Parse the Makefile-style depfile that `g++ -MD -MF <file> -MT <target>` writes, exactly.

`-MD`, not `-MMD`: `-MMD` leaves out what g++ deems a system header (all under `-isystem`, a file after
`#pragma GCC system_header` and what it includes), and those are inputs like any other.
We pass the target ourselves, so the rule is found by its known text (GCC writes
an `-MT` target verbatim): a `:` inside a header name is just a character.
The prerequisites are unquoted the way GCC 12's `munge` quotes them: a space
or tab is preceded by a backslash (and the backslashes before it in the name
are doubled), `#` by a backslash, `$` is doubled; every other character,
backslashes included, is written as is. What this quoting cannot represent
(a name ending in a backslash or holding a newline) or text GCC does not write
raises `DepfileError`; a name that only looks well formed is caught by the
caller, which requires every prerequisite to exist.
"""
from __future__ import annotations

import os

from ..errors import DepfileError

# Recorded with every compile's values: states recorded under `-MMD` (no system headers, none behind
# `-isystem` or `#pragma GCC system_header`) are incomplete, so their units rebuild once.
TRACKING = "MD exact + shared sets"


def written_target(target: str) -> str:
    """`-MT target` as g++ writes it: leading `./` (and the slashes after one) dropped, the rest verbatim."""
    while target.startswith("./"):
        target = target[2:].lstrip("/")
    return target


def read_depfile(path: str | os.PathLike, target: str) -> list[str] | None:
    """Every file the compiler read, as written, from the depfile at `path` (DepfileError when not exactly
    parseable); None without one."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
    except OSError:
        return None
    return parse_depfile(text, target)


def as_named(path: str) -> str:
    """A depfile name joined to where the compiler ran, as the compiler named that file: `a/b/../c.h` folded to
    `a/c.h` only when that is the same file (through a symbolic link, `..` does not undo the step before it,
    as ccache knows), a leading `./` dropped."""
    short = os.path.normpath(path)
    if os.path.realpath(short) == os.path.realpath(path):
        return short
    return path[2:] if path.startswith("./") else path


def parse_depfile(text: str, target: str) -> list[str]:
    """The prerequisites of the rule of `target` (as passed to `-MT`), in order, without duplicates.

    Empty `name:` rules after it (from `-MP`) are allowed when they name those
    prerequisites; anything else raises `DepfileError`.
    """
    target = written_target(target)
    head = target + ":"
    if not text.startswith(head):
        raise DepfileError(f"it does not start with the target {target!r} we asked for "
                           "(is -MT, -MQ or -MF in CXXFLAGS?)")
    words, end = _words(text, len(head))
    deps = list(dict.fromkeys(words))
    for line in text[end:].splitlines():
        if not line.strip():
            continue
        if not line.endswith(":"):
            raise DepfileError(f"unexpected text after the rule: {line[:80]!r} (a header name with a newline?)")
        phony, _ = _words(line[:-1], 0)
        if len(phony) != 1 or phony[0] not in deps:
            raise DepfileError(f"unexpected rule after the first: {line[:80]!r}")
    return deps


def _words(text: str, i: int) -> tuple[list[str], int]:
    """The words of one rule from `text[i:]`, and the index just past the rule's end of line."""
    words: list[str] = []
    cur: list[str] = []
    n = len(text)

    def flush() -> None:
        if cur:
            words.append("".join(cur))
            cur.clear()

    while i < n:
        ch = text[i]
        if ch == "\\":
            j = i
            while j < n and text[j] == "\\":
                j += 1
            run, nxt = j - i, text[j:j + 1]
            if nxt in (" ", "\t"):
                if run % 2 == 0:
                    raise DepfileError("a header name ends in a backslash, which a depfile cannot represent")
                cur.append("\\" * (run // 2) + nxt)
                i = j + 1
            elif nxt == "#":
                cur.append("\\" * (run - 1) + "#")
                i = j + 1
            elif nxt == "\n" or text.startswith("\r\n", j):
                if run != 1:
                    raise DepfileError("a header name ends in a backslash, which a depfile cannot represent")
                flush()                                  # line continuation
                i = j + (1 if nxt == "\n" else 2)
            else:
                cur.append("\\" * run)
                i = j
        elif ch == "$":
            if text[i + 1:i + 2] != "$":
                raise DepfileError("a lone '$' (g++ writes '$$')")
            cur.append("$")
            i += 2
        elif ch in " \t":
            flush()
            i += 1
        elif ch == "\n" or text.startswith("\r\n", i):
            flush()
            return words, i + (1 if ch == "\n" else 2)
        elif ch == "#":
            raise DepfileError("an unquoted '#' (g++ writes '\\#')")
        else:
            cur.append(ch)
            i += 1
    flush()
    return words, n
