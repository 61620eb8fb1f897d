"""A stand-in C++ compiler for tests (test support, NOT product code; it compiles nothing).

Run as ``python fake_compiler.py <g++-like argv>``. It understands the argv our
platforms produce and `compile.actions.run_compile` adds:

* ``-o OUT``: writes OUT, a small text file ``fake-object <digest>`` where the
  digest (64-bit FNV-1a: no hashlib, every compile starts a Python) covers the
  flags (the argv minus every path: -o/-MF/-MT values, -I dirs,
  -ffile-prefix-map, the source's name) and the content of every file read,
  in order: a change of a -D flag or of any header read changes OUT;
* ``-MD -MF DEP -MT TARGET``: writes DEP in make format (``TARGET: source
  header...``, names quoted as GCC quotes them), listing the source and every
  header read;
* ``-I DIR`` / ``-IDIR``: where quoted includes are searched after the
  including file's own directory;
* everything else starting with ``-`` (``-D...``, ``-ffile-prefix-map=...``, ...)
  only enters the flag digest; ``--version`` prints a version line.

Sources are followed through ``#include "name"`` lines, recursively (each file
read once, like ``#pragma once``), searched relative to the including file,
then in the -I dirs; the name is written as GCC writes it (``dir/name`` with
the directory as it reached us, e.g. ``./kernels/aic/../common.h``).
``#include <...>`` is ignored: the stand-in has no system headers. A quoted
include found nowhere is "fatal error: No such file or directory" (exit 1),
except the runtime headers the fake platform provides itself
(`RUNTIME_HEADERS`: identity-covered, like the host runtime's, so never listed).
A line ``#error ...`` in any file read makes it print a gcc-like error and exit 1
without writing OUT or DEP.

With ``$PYPTO_FAKE_CXX_LOG`` set, each run first appends one JSON line to that file: its
whole command line as it was started (``sys.orig_argv``: the interpreter, ``-S``, this
script, the arguments) and its working directory, so a test can compare what ran.

Standard library only, and little of it (`re` and `hashlib` cost more to import than the rest of a
compile): it runs as a script, outside the package.
"""
from __future__ import annotations

import os
import sys

VERSION = "fake-c++ (pypto_build.testing stand-in) 1.0"
RUNTIME_HEADERS = frozenset({"tensor.h", "pto_orchestration_api.h"})   # what synth sources include from the runtime

_WITH_VALUE = ("-o", "-MF", "-MT", "-MQ", "-I", "-isystem", "-iquote", "-idirafter", "-include", "-x")
_PATH_VALUED = ("-o", "-MF", "-MT", "-MQ", "-I", "-isystem", "-iquote", "-idirafter", "-include")


class CompileError(Exception):
    """What gcc would print before exiting 1."""


def parse_argv(argv: list[str]) -> dict:
    """The options the stand-in acts on: out, depfile, target, include dirs, flags (digested), sources."""
    opts: dict = {"out": None, "depfile": None, "target": None, "includes": [], "flags": [], "sources": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag = next((f for f in _WITH_VALUE if arg == f or (arg.startswith(f) and f in ("-o", "-I"))), None)
        if flag is not None:
            if arg == flag:
                if i + 1 >= len(argv):
                    raise CompileError(f"missing argument to '{flag}'")
                value, i = argv[i + 1], i + 2
            else:
                value, i = arg[len(flag):], i + 1
            key = {"-o": "out", "-MF": "depfile", "-MT": "target", "-MQ": "target"}.get(flag)
            if key:
                opts[key] = value
            elif flag == "-I":
                opts["includes"].append(value)
            if flag not in _PATH_VALUED:
                opts["flags"] += [flag, value]
            continue
        if arg.startswith("-"):
            if not arg.startswith("-ffile-prefix-map="):
                opts["flags"].append(arg)
        else:
            opts["sources"].append(arg)
        i += 1
    return opts


def read_tree(source: str, includes: list[str]) -> list[tuple[str, bytes]]:
    """Every file the source reads (itself first), as (name as GCC would write it, content)."""
    seen: dict[str, None] = {}
    files: list[tuple[str, bytes]] = []

    def visit(name: str) -> None:
        real = os.path.realpath(name)
        if real in seen:
            return
        seen[real] = None
        try:
            with open(name, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CompileError(f"{name}: {exc.strerror or exc}") from None
        files.append((name, data))
        text = data.decode("utf-8", "surrogateescape")
        for lineno, line in enumerate(text.splitlines(), 1):
            directive, rest = _directive(line)
            if directive == "error":
                raise CompileError(f"{name}:{lineno}:{line.index('#') + 2}: error: #error{rest}")
            if directive == "include" and rest.startswith('"') and rest.count('"') >= 2:
                header = rest.split('"')[1]
                found = _search(header, name, includes)
                if found is None:
                    if header in RUNTIME_HEADERS:
                        continue
                    raise CompileError(f"{name}:{lineno}:10: fatal error: {header}: No such file or "
                                       "directory\ncompilation terminated.")
                visit(found)

    visit(source)
    return files


def _directive(line: str) -> tuple[str, str]:
    """(`include` | `error` | other word, the rest of the line) of a `#` line; ("", "") otherwise."""
    stripped = line.strip()
    if not stripped.startswith("#"):
        return "", ""
    body = stripped[1:].lstrip()
    word = body.split(None, 1)[0] if body else ""
    if word.startswith("include"):
        return "include", body[len("include"):].strip()
    if word == "error":
        return "error", body[len("error"):]
    return word, ""


def _search(header: str, includer: str, includes: list[str]) -> str | None:
    if os.path.isabs(header):
        return header if os.path.isfile(header) else None
    here = os.path.dirname(includer)
    for directory in (here, *includes):
        candidate = os.path.join(directory, header) if directory else header
        if os.path.isfile(candidate):
            return candidate
    return None


def fnv1a(data: bytes) -> int:
    """64-bit FNV-1a of `data`: deterministic across runs (unlike `hash()`), no module needed."""
    value = 0xcbf29ce484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value


def quote(name: str) -> str:
    """A depfile name quoted as GCC's `munge` does: backslashes before a space doubled, `\\ `, `\\#`, `$$`."""
    out: list[str] = []
    backslashes = 0
    for ch in name:
        if ch == "\\":
            backslashes += 1
            out.append(ch)
            continue
        if ch in " \t":
            out.append("\\" * backslashes + "\\")
        elif ch == "#":
            out.append("\\")
        elif ch == "$":
            out.append("$")
        backslashes = 0
        out.append(ch)
    return "".join(out)


def compile_(argv: list[str]) -> None:
    opts = parse_argv(argv)
    if len(opts["sources"]) != 1:
        raise CompileError(f"expected one source file, got {len(opts['sources'])}")
    if not opts["out"]:
        raise CompileError("no -o output given")
    files = read_tree(opts["sources"][0], opts["includes"])
    flags = "\0".join(opts["flags"]).encode("utf-8", "surrogateescape")
    digest = fnv1a(b"\0\0".join([flags, *(data for _name, data in files)]))
    with open(opts["out"], "w", encoding="utf-8") as handle:
        handle.write(f"fake-object {digest:016x}\n")
    if opts["depfile"]:
        target = opts["target"] or opts["out"]
        while target.startswith("./"):          # as g++ writes an -MT target
            target = target[2:].lstrip("/")
        names = " ".join(quote(name) for name, _data in files)
        with open(opts["depfile"], "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(f"{target}: {names}\n")


LOG_ENV = "PYPTO_FAKE_CXX_LOG"


def log_run() -> None:
    """Append this run's command line and working directory to `$PYPTO_FAKE_CXX_LOG` (when set)."""
    log = os.environ.get(LOG_ENV)
    if log:
        import json
        with open(log, "a", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(json.dumps({"argv": sys.orig_argv, "cwd": os.getcwd()}) + "\n")


def main(argv: list[str]) -> int:
    log_run()
    if argv == ["--version"]:
        print(VERSION)
        return 0
    try:
        compile_(argv)
    except CompileError as exc:
        print(str(exc) if ": error: " in str(exc) or "fatal error" in str(exc) else f"fake-c++: error: {exc}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
