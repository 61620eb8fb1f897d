"""Compile launchers (distcc, icecream, ccache, sccache): how a compile runs, never what it is.

A launcher comes from `--launcher`, else `$PYPTO_BUILD_LAUNCHER`, else the first
words of `$CXX` when they name a known launcher (`CXX="distcc g++"`). As in
ccache's rule, it is not part of a unit's identity: the compiler behind it is
(`compiler.resolve_compiler` resolves it without the launcher), so turning distribution on or
off rebuilds nothing, and a binary built either way is the same file.

distcc (and icecream) send only compile-only (`-c`) jobs to other hosts and run
anything that also links here, so a command that compiles and links in one (every
`.so` built here) is split (`split`): the compile, `-c` through the launcher (its
preprocessing, and so the depfile, happens here), then the link, the same command
with the object in place of the source, here, in a local slot (`local_slots`).
The two give the one command's bytes (tests/test_distcc.py), except with debug
info: distcc preprocesses before the compiler sees the source, which moves DWARF's
line columns (and so the build id). A command with `-g` (the host orchestrations)
therefore runs whole and here, as does any command `split` does not recognise.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..core import settings
from ..errors import ToolchainError, warn
from ..core.which import which
from ..core.shared_flag import SharedFlag

ENV = settings.LAUNCHER
# Known launchers, with the words each prints when it compiled here instead of on a host it was sent to. icecream
# 1.4 says nothing when its scheduler or daemon is down (tested by hand, docs/ci.md), only when a host fails.
KNOWN: dict[str, tuple[str, ...]] = {"distcc": ("running locally instead",),
                                     "icecc": ("got exception", "no server found"), "ccache": (), "sccache": ()}
# icecream's default: any warning from a remote compile makes the client discard it and compile again here, because
# gcc's carets differ on preprocessed input; we show a compiler's output only when it fails, so that is pure waste.
_ENV = {"icecc": {"ICECC_CARET_WORKAROUND": "0"}}
_SOURCES = (".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".C", ".CPP")
_WHOLE = ("-c", "-E", "-S", "-x", "-M", "-MM")      # already compile-only, or not a plain compile + link


@dataclass(frozen=True)
class Launcher:
    """The launcher of one run: its command (first word resolved), the flag its processes share so that a
    fallback to local compiles is said once, and (per compiler: `for_compiler`) the compiler's name."""

    command: tuple[str, ...]
    fell_back: SharedFlag
    compiler: str = ""              # the compiler as the launcher is to run it (`Compiler.launched_as`)

    @property
    def name(self) -> str:
        return os.path.basename(self.command[0])

    def for_compiler(self, name: str) -> Launcher:
        """This launcher running the compiler `name` (`compiler.Compiler.launched_as`)."""
        return replace(self, compiler=name)

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` (its compiler first) as run through the launcher."""
        return [*self.command, self.compiler or argv[0], *argv[1:]]

    def env(self) -> dict[str, str] | None:
        """The environment the launcher runs in (None: ours): icecream without its caret workaround, unless
        the user set it."""
        extra = {k: v for k, v in _ENV.get(self.name, {}).items() if k not in os.environ}
        return {**os.environ, **extra} if extra else None

    def note_fallback(self, output: str) -> None:
        """One line per run when the launcher said it compiled here (a dead host): its own fallback, nothing
        wrong (the binary is the same); the compile's values are recorded as any other's."""
        said = next((line.strip() for line in output.splitlines()
                     if any(marker in line for marker in KNOWN.get(self.name, ()))), None)
        if said is not None and self.fell_back.raise_once():
            hosts = "$DISTCC_HOSTS and the hosts' distccd" if self.name == "distcc" else "its hosts"
            warn(f"{self.name} compiled here, not on a remote host ({said[:200]}); check {hosts} — the build "
                 "goes on")


def peel(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(launcher words, compiler words) of `$CXX`'s words: leading words that name a known launcher."""
    words = list(words)
    n = 0
    while n < len(words) - 1 and os.path.basename(words[n]) in KNOWN:
        n += 1
    return words[:n], words[n:]


def resolve(option: str | tuple[str, ...] | None = None, env: Mapping[str, str] | None = None,
            from_cxx: Sequence[str] = ()) -> Launcher | None:
    """The run's launcher: `option` (a tuple: a command `find` found already), else `$PYPTO_BUILD_LAUNCHER`,
    else the one `$CXX` starts with; None.

    A launcher that is not found is one line (ToolchainError) before anything is built.
    """
    command = option if isinstance(option, tuple) else find(option, env, from_cxx)
    return None if command is None else Launcher(command, SharedFlag())


def find(option: str | None = None, env: Mapping[str, str] | None = None,
         from_cxx: Sequence[str] = ()) -> tuple[str, ...] | None:
    """The launcher command `resolve` would use, or None; ToolchainError when it is not there.

    Its first word is resolved on PATH, or, when it names a directory (`./mylauncher`), against the
    current directory, here and now: compiles run in the build directory, where a relative path means
    something else.
    """
    env = os.environ if env is None else env
    name, spec = ("--launcher", option) if option else (ENV, env.get(ENV) or "")
    words = settings.split_words(spec, name) if spec.strip() else list(from_cxx)
    if not words:
        return None
    if not spec.strip():
        name, spec = "CXX", env.get("CXX") or " ".join(from_cxx)
    exe = which(words[0], path=env.get("PATH"))
    if exe is None:
        where = "not found" if os.path.dirname(words[0]) else "not found on PATH"
        tool = os.path.basename(words[0])
        fix = (f"install it (apt install {_PACKAGES[tool]})" if tool in _PACKAGES else
               "install it, or give its path")
        raise ToolchainError(f"compile launcher '{words[0]}' {where} (from {name}={spec!r}); {fix}, or "
                             f"{'drop it from' if name == 'CXX' else 'unset'} {name}")
    return (os.path.abspath(exe), *words[1:])


# The Debian package of each known launcher (`KNOWN`), for the line that says one is missing.
_PACKAGES = {"distcc": "distcc", "icecc": "icecc", "ccache": "ccache", "sccache": "sccache"}


def split(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(compile, link) of a command that compiles one source (its last word) and links it with `-shared`,
    or None when it must run whole: already compile-only, several sources, or debug info (see the module).

    compile: the command without `-shared` and `-Wl,...`, with `-c`; link: the command with the
    object in the source's place (the caller fills in both outputs and the object's name).
    """
    if "-shared" not in argv or "-o" not in argv or any(a in _WHOLE for a in argv) or debug_info(argv):
        return None
    if not argv[-1].endswith(_SOURCES) or sum(1 for a in argv if a.endswith(_SOURCES) and a[:1] != "-") != 1:
        return None
    compile_argv = [a for a in argv if a != "-shared" and not a.startswith("-Wl,")]
    compile_argv[-1:-1] = ["-c"]
    return compile_argv, list(argv)


def debug_info(argv: Sequence[str]) -> bool:
    """Whether the command asks for debug info (any `-g...` but `-g0`; the last one counts, as gcc reads it)."""
    flags = [a for a in argv if a.startswith("-g") and not a.startswith(("-gno-", "-gz", "-gsplit"))]
    return bool(flags) and flags[-1] != "-g0"


def local_jobs() -> int:
    """How much local work a distributed run does at once: this process's CPUs."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ElfKind:
    """What an ELF file is: its class (32/64 bits), data encoding, machine and type (ET_REL, ET_DYN, ...)."""

    elfclass: int
    little_endian: bool
    machine: str
    type: str


def compiled_object(launcher: Launcher, path: str) -> ElfKind:
    """The kind of the object `launcher` was to write at `path` (created empty before it ran), or
    ToolchainError: a launcher that exits 0 after writing nothing there, or something else than a
    relocatable ELF object, must not get its output linked, installed or cached (GNU ld links an empty
    file into a valid, empty library)."""
    kind, _ = _elf_kind(path)
    if kind is None or kind.type != "ET_REL":
        size = _size(path)
        found = ("is empty: nothing was written there" if size == 0 else "is gone" if size < 0 else
                 "is not an ELF file" if kind is None else f"is an ELF file of type {kind.type}, not an object")
        raise ToolchainError(f"{launcher.name} ({launcher.command[0]}) exited 0 but the object it was to write "
                             f"{found}; check the launcher (or build without it) — binary not installed")
    return kind


def linked_binary(launcher: Launcher, path: str, made: ElfKind, entry: str) -> None:
    """ToolchainError unless the library linked here from `launcher`'s object is of the object's class and
    machine and exports `entry`, the symbol the platform runs (`kernel_entry`, the orchestration's function)."""
    kind, exported = _elf_kind(path, entry)
    problem = ("the library linked from it is not of the object's ELF class and machine" if kind is None or
               (kind.elfclass, kind.little_endian, kind.machine) != (made.elfclass, made.little_endian, made.machine)
               else f"the library linked from its object does not export {entry}, the symbol the platform runs"
               if entry and not exported else None)
    if problem:
        raise ToolchainError(f"{launcher.name} ({launcher.command[0]}) exited 0 but {problem}; check the launcher "
                             "(or build without it) — binary not installed")


def _elf_kind(path: str, symbol: str = "") -> tuple[ElfKind | None, bool]:
    """The ELF header of `path` (None when it is not an ELF file or cannot be read), and whether its dynamic
    symbol table defines `symbol` (global or weak)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        with open(path, "rb") as handle:
            elf = ELFFile(handle)
            kind = ElfKind(elf.elfclass, elf.little_endian, elf["e_machine"], elf["e_type"])
            table = elf.get_section_by_name(".dynsym") if symbol else None
            found = table.get_symbol_by_name(symbol) if isinstance(table, SymbolTableSection) else None
            return kind, any(s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                             for s in found or ())
    except (OSError, ELFError):
        return None, False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1
