"""Precompiled preludes, planned: which kernels begin with the same directives, and the unit that precompiles them.

Every PTO-ISA kernel PyPTO generates begins with the same few directives (`#include <cstdint>`, the `__gm__` /
`__aicore__` macros, `#include <pto/pto-inst.hpp>`, `#include "tensor.h"`), and parsing what they include is
~40 % of its compile. A *prelude* is such a run of directives, read as the preprocessor reads them (`directives`:
continued lines joined, comments a space): its text is those logical lines only. The run stops where a prelude
built elsewhere would differ (`DYNAMIC`) and, early, at what this reader does not read exactly. For the kernels of one command line (same compiler, same
argv but the source and output, same working directory when a path in it is relative) the prelude is the
longest run of leading directives that all of them but one in ten (at least one may differ), and at least
two, begin with — so the most kernels take it, and a kernel whose prelude was edited by hand leaves it as it
was, and compiles the plain way.

A `PreludeUnit` is a unit of the graph with its own identity (`key`: the compiler's identity, the argv, the
working directory when it matters, the prelude's text; the headers it reads are checked against the store's
entry: cache/preludes.py). It is built once (`prelude_actions.run_prelude`) and every kernel that begins with
exactly its text compiles with it; nothing here runs or writes.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from ..core import stages
from ..core.hashing import text_digest
from ..core.safeio import open_regular
from .command import last_o
from .plan import INCLUDE_FLAGS, include_flag_values

if TYPE_CHECKING:
    from ..platforms import Platform
    from .plan import CompileUnit, SubBuildPlan

VERSION = "pypto_build-prelude-1"
HEAD_BYTES = 64 * 1024          # a prelude starts within a kernel's first 64 KiB, or the kernel has none
# Directives a prelude may hold: what defines macros and includes headers. Anything else (`#pragma`, `#line`,
# `#error`, ...) ends it, as does the first line of code.
_ALLOWED = ("include", "define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif")
_OPEN, _CLOSE = ("if", "ifdef", "ifndef"), "endif"
# What a prelude's own directives may not name: each has another value in prelude.h (built in the store, from
# line 1) than in the kernel, or asks the file system relative to the file (`__has_include("x")`).
DYNAMIC = ("__LINE__", "__FILE__", "__FILE_NAME__", "__BASE_FILE__", "__INCLUDE_LEVEL__", "__COUNTER__", "__DATE__",
           "__TIME__", "__TIMESTAMP__", "__has_include", "__has_include_next")
_DYNAMIC_RE = re.compile(r"\b(?:%s)\b" % "|".join(DYNAMIC))
_SPACE = " \t\f\v"
_SPLICE_RE = re.compile(r"\\[ \t\f\v]*\n")               # GCC joins a backslash, spaces, a newline
_UNREAD_RE = re.compile(r"\?\?[=/'()!<>-]|\r(?!\n)")       # a trigraph (-trigraphs, -std=c++NN) or a lone CR
_INCLUDE_RE = re.compile(r"[ \t\f\v]*#[ \t\f\v]*include[ \t\f\v]*")
_PATH_FLAGS = (*INCLUDE_FLAGS, "--sysroot", "-B")         # where the compiler finds headers


@dataclass(frozen=True)
class PreludeUnit:
    """One precompiled prelude: `prelude:<core>.<key[:8]>`. `argv`: the kernels' command line without the
    output and the source (compiler first); `cwd`: where it runs (absolute); `text`: prelude.h's text."""

    task: str
    key: str
    text: str
    directives: tuple[str, ...]
    argv: tuple[str, ...]
    cwd: str
    compiler: str           # the compiler's identity
    timeout: float = 900.0


@dataclass(frozen=True)
class Preludes:
    """The graph's preludes and which kernel (compile task) begins with which."""

    units: tuple[PreludeUnit, ...] = ()
    used_by: tuple[tuple[str, str], ...] = ()       # (compile task, prelude task): kernels that begin with it
    others: tuple[tuple[str, str], ...] = ()        # kernels of its command line that do not (they say so)

    def of(self, task: str) -> PreludeUnit | None:
        """The prelude of `task`'s command line (whether its text begins with it is decided when it compiles)."""
        return self._by_kernel.get(task)

    def begins(self, task: str) -> bool:
        """Whether `task`'s kernel began with its prelude when planned (its prelude is built before it)."""
        return task in self._users

    @cached_property
    def _by_kernel(self) -> dict[str, PreludeUnit]:
        """`of`, for every kernel at once (asked once per kernel: no scan each time)."""
        units = {u.task: u for u in self.units}
        return {task: units[name] for task, name in (*self.others, *self.used_by) if name in units}

    @cached_property
    def _users(self) -> frozenset[str]:
        return frozenset(task for task, _ in self.used_by)

    @cached_property
    def firsts(self) -> frozenset[str]:
        """The first kernel (compile task) of each prelude: its build is set up by that kernel."""
        return frozenset({name: task for task, name in reversed(self.used_by)}.values())


def directives(text: str) -> list[str]:
    """The leading directives of a source as the preprocessor reads them: each a logical line (continuations
    joined, every comment one space), skipping blank lines, up to the first line that is not one, a directive
    a prelude may not hold, or one that names what differs between a prelude and the kernel (`DYNAMIC`)."""
    return _leading(text, whole=True)[0]


def _leading(text: str, whole: bool) -> tuple[list[str], bool]:
    """`directives(text)`, and whether they ended before the text did (`whole`: `text` is all of the file, so
    its last line is complete; else more may follow and a run that reached the end has not ended)."""
    lines, stopped = _logical_lines(text, whole)
    found: list[str] = []
    for line in lines:
        stripped = line.strip(_SPACE)
        if not stripped:
            continue
        if not stripped.startswith("#") or _name(stripped) not in _ALLOWED or _DYNAMIC_RE.search(stripped):
            return found, True
        found.append(stripped)
    return found, stopped


def _logical_lines(text: str, whole: bool) -> tuple[list[str], bool]:
    """The logical lines of `text` as translation phases 1-3 make them: `\\`-newline joined (spaces between
    them too, as GCC allows), each comment one space, string and character literals and `#include <...>`
    names kept whole. Stops (True) at what it does not read exactly — a trigraph, a lone CR, a literal with
    a prefix or that does not close on its line, a digit separator, a comment marker or quote in a header
    name — keeping only the lines before it. An unfinished last line is dropped unless `whole`."""
    s, stopped = _spliced(text)
    lines: list[str] = []
    cur: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\n":
            lines.append("".join(cur))
            cur = []
            i += 1
        elif s.startswith("//", i):
            end = s.find("\n", i)
            if end < 0:
                i = n
                break
            cur.append(" ")
            i = end
        elif s.startswith("/*", i):
            end = s.find("*/", i + 2)
            if end < 0:
                return lines, stopped       # the comment goes on past what was read
            cur.append(" ")
            i = end + 2
        elif c in "\"'":
            before = cur[-1][-1:] if cur else ""
            end = _literal_end(s, i)
            if end is None or before.isalnum() or before == "_":
                return lines, True          # R"(...)", u8"", 1'000, or an open literal: not read here
            cur.append(s[i:end])
            i = end
        elif c == "<" and _INCLUDE_RE.fullmatch("".join(cur)):
            end, eol = s.find(">", i), s.find("\n", i)
            name = s[i:end + 1]
            if end < 0 or 0 <= eol < end or any(m in name for m in ('"', "'", "//", "/*")):
                return lines, True
            cur.append(name)
            i = end + 1
        else:
            cur.append(c)
            i += 1
    if cur and (whole and not stopped):
        lines.append("".join(cur))
    return lines, stopped


def _spliced(text: str) -> tuple[str, bool]:
    """`text` with CR-LF as LF and every backslash-newline removed (phase 2), cut before the first trigraph or
    lone CR (True: cut there)."""
    cut = _UNREAD_RE.search(text)
    if cut is not None:
        text = text[:cut.start()]
        text = text[:text.rfind("\n") + 1]          # only whole lines before it
    return _SPLICE_RE.sub("", text.replace("\r\n", "\n")), cut is not None


def _literal_end(s: str, i: int) -> int | None:
    """The index after the string or character literal that starts at `s[i]`, or None when it does not close
    on its line."""
    quote, j = s[i], i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
        elif s[j] == quote:
            return j + 1
        elif s[j] == "\n":
            return None
        else:
            j += 1
    return None


def _name(line: str) -> str:
    word = line[1:].lstrip()
    end = 0
    while end < len(word) and (word[end].isalnum() or word[end] == "_"):
        end += 1
    return word[:end]


def boundaries(block: Sequence[str]) -> list[int]:
    """The lengths at which a prefix of `block` is a prelude: every conditional closed, at least one `#include`."""
    depth, included, found = 0, False, []
    for n, line in enumerate(block, 1):
        name = _name(line.strip())
        depth += 1 if name in _OPEN else -1 if name == _CLOSE else 0
        if depth < 0:
            break
        included = included or name == "include"
        if depth == 0 and included:
            found.append(n)
    return found


def choose(blocks: Sequence[Sequence[str]]) -> tuple[str, ...] | None:
    """The longest prelude that all of `blocks` but one in ten (at least one may differ), and at least two,
    begin with, or None: the most kernels take it, and one hand-edited prelude does not change it."""
    counts: Counter[tuple[str, ...]] = Counter()
    for block in blocks:
        for n in boundaries(block):
            counts[tuple(block[:n])] += 1
    need = max(2, len(blocks) - max(1, len(blocks) // 10))
    best = [p for p, c in counts.items() if c >= need]
    return max(best, key=len) if best else None


def begins_with(block: Sequence[str], prelude: Sequence[str]) -> bool:
    """Whether a kernel's leading directives begin with exactly `prelude`'s."""
    return len(block) >= len(prelude) and tuple(block[:len(prelude)]) == tuple(prelude)


def head_of(path: str | os.PathLike) -> list[str]:
    """The leading directives of the source at `path`, read only as far as they go (at most `HEAD_BYTES`; a
    longer run is none; unreadable: none)."""
    size, data = 4096, b""
    try:
        with open_regular(path) as handle:
            while True:
                data += handle.read(size - len(data))
                whole = len(data) < size                  # the end of the file
                text = data.decode("utf-8", errors="surrogateescape")
                if not whole:
                    text = text[:text.rfind("\n") + 1]    # never a directive cut short
                found, ended = _leading(text, whole)
                if ended or whole:
                    return found
                if size >= HEAD_BYTES:
                    return []
                size *= 4
    except OSError:
        return []


def quoted_beside(prelude: Sequence[str], source: str | os.PathLike) -> str | None:
    """The first `#include "name"` of `prelude` that a file beside `source` answers (the compiler looks there
    first, and the precompiled header was made elsewhere), or None."""
    n = _first_beside(prelude, source)
    return None if n is None else _quoted(prelude[n])


def _first_beside(block: Sequence[str], source: str | os.PathLike) -> int | None:
    folder = os.path.dirname(os.path.abspath(source))
    for n, line in enumerate(block):
        name = _quoted(line)
        if name is not None and os.path.exists(os.path.join(folder, name)):
            return n
    return None


def _quoted(line: str) -> str | None:
    """The name of an `#include "name"` line, else None."""
    stripped = line.strip()
    if _name(stripped) != "include":
        return None
    rest = stripped[1:].lstrip()[len("include"):].strip()
    return rest[1:rest.index('"', 1)] if rest.startswith('"') and '"' in rest[1:] else None


def usable(block: Sequence[str], source: str | os.PathLike) -> list[str]:
    """A kernel's leading directives up to its first `#include "..."` a file beside it answers (a precompiled
    header made elsewhere cannot stand for that one)."""
    n = _first_beside(block, source)
    return list(block if n is None else block[:n])


def header_text(prelude: Sequence[str]) -> str:
    """prelude.h's text: the directives, one after another."""
    return "\n".join(prelude) + "\n"


def pch_argv(argv: Sequence[str]) -> tuple[str, ...] | None:
    """A kernel's argv without its output (`-o X`) and its source (the last word); None when it cannot take a
    prelude: no `-o` or source, or it forces includes of its own (`-include`, `-imacros`: ours would change
    their order)."""
    words = list(argv)
    if "-o" not in words or len(words) < 3 or any(w.startswith(("-include", "-imacros")) for w in words):
        return None
    o = last_o(words)
    if o + 1 >= len(words) - 1:
        return None
    return (*words[:o], *words[o + 2:-1])


def relative_paths(argv: Sequence[str]) -> bool:
    """Whether a path the argv gives to an include flag is relative (then the working directory matters)."""
    return any(value and not os.path.isabs(value.lstrip("=")) for value in include_flag_values(argv, _PATH_FLAGS))


def prelude_key(compiler: str, argv: Sequence[str], cwd: str, text: str) -> str:
    """The prelude's identity but its headers (checked against the store's entry when used)."""
    return text_digest(VERSION, compiler, *argv, cwd if relative_paths(argv) else "", text)


def plan_preludes(root: Path, plans: Iterable[SubBuildPlan], platform: Platform) -> Preludes:
    """The preludes of `plans`' kernels (none unless the platform offers preludes and its kernel compiler is
    GCC, by its `--version`: clang's precompiled headers are another format). Groups the kernels by command
    line (`pch_argv`, working directory, compiler), chooses each group's prelude (`choose`, from each kernel's
    `usable` directives: a "tensor.h" next to a kernel ends its prelude), and keeps those at least two kernels
    begin with."""
    if platform.facts.no_preludes is not None:
        return Preludes()
    groups: dict[tuple, list[tuple[CompileUnit, list[str]]]] = {}
    for p in plans:
        compiler = platform.compiler_for("kernel", p.context.runtime_name)
        if not compiler.is_gcc:
            continue
        for u in p.units:
            argv = pch_argv(u.argv) if u.kind == "kernel" else None
            if argv is None:
                continue
            source = os.path.join(root, u.source)
            groups.setdefault((argv, _cwd(root, u) if relative_paths(argv) else "", compiler.identity), []).append(
                (u, usable(head_of(source), source)))
    units, used, others = [], [], []
    for (argv, _, compiler), members in groups.items():
        prelude = choose([block for _, block in members])
        if prelude is None:
            continue
        users, rest = [], []
        for u, block in members:
            (users if begins_with(block, prelude) else rest).append(u)
        if len(users) < 2:
            continue
        text = header_text(prelude)
        first, cwd = users[0], _cwd(root, users[0])
        key = prelude_key(compiler, argv, cwd, text)
        unit = PreludeUnit(stages.task(stages.PRELUDE, f"{_core(first.task) or 'kernel'}.{key[:8]}"), key, text,
                           tuple(prelude), argv, cwd, compiler, first.timeout)
        units.append(unit)
        used += [(u.task, unit.task) for u in users]
        others += [(u.task, unit.task) for u in rest]
    return Preludes(tuple(units), tuple(used), tuple(others))


def _cwd(root: Path, unit: CompileUnit) -> str:
    """Where `unit` compiles (absolute)."""
    return os.path.join(root, unit.cwd or unit.sub_rel)


def _core(task: str) -> str:
    """A kernel task's core type (`compile:<sub>/<core>/<name>`), else ""."""
    label = task.partition(":")[2].split("/")
    return label[-2] if len(label) > 1 else ""
