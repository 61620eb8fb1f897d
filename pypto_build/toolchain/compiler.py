"""Compilers: finding one, its identity, the directories it searches; the digest of a command line.

`Compiler.identity` is the resolved path, a digest of the binary and its
`--version` text, so replacing or upgrading the compiler recompiles
everything; a platform then extends it with the environment the compiler reads
and the programs its driver runs (`driver.keyed`). What each platform compiles
with (its argv) is the platform's (`platforms/`).
"""
from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from . import search_dirs
from .compile_env import PROBE_DROPS
from ..core import settings
from ..errors import ToolchainError, one_line
from ..core.hashing import file_digest, text_digest
from .launcher import peel
from ..core.procs import describe, run
from ..core.which import which

PACKAGE_DIR = Path(__file__).resolve().parents[1]      # the package (this module is in toolchain/)
VERSION_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Compiler:
    """A resolved C++ compiler command (`$CXX` may carry a launcher or flags)."""

    command: tuple[str, ...]   # as configured, first word resolved to an absolute path; no launcher
    identity: str              # digest of path + binary + --version (+ environment and programs: `driver.keyed`)
    version: str               # first line of --version
    probe: str = ""            # digest of path + words + --version: the identity but the binary's content
    launcher: tuple[str, ...] = ()  # the launcher words `$CXX` started with (`distcc`): not in the identity
    named: str = ""            # the first word as configured (`g++`): what a launcher is given to run
    watch: tuple[str, ...] = ()     # the paths the programs its driver runs were found by (`driver.keyed`: the
                                    # program files, the directories searched): the no-op record stats them

    @property
    def path(self) -> str:
        return self.command[0]

    @property
    def is_gcc(self) -> bool:
        """Whether its `--version` says GCC (`g++ (Debian 12.2.0-14) 12.2.0`, `g++-15 (GCC) 15.1.0`), not clang."""
        said = self.version.lower()
        return "clang" not in said and ("g++" in said or "gcc" in said)

    @property
    def launched_as(self) -> str:
        """How a launcher is told to run it: a bare name as configured (found on each host's PATH, as distccd
        requires), else the resolved path."""
        return self.named if self.named and "/" not in self.named else self.path


@dataclass(frozen=True)
class CompilerProbe:
    """What `$CXX` resolves to now: the binary (symlinks resolved), its extra words and its `--version` text."""

    exe: str
    words: tuple[str, ...]
    version: str
    launcher: tuple[str, ...] = ()
    named: str = ""

    @property
    def digest(self) -> str:
        """The identity without the binary's content (the no-op record compares the binary by stat)."""
        return text_digest(self.exe, *self.words, self.version)


def probe_compiler(spec: str, env_var: str = "CXX", path: str | None = None) -> CompilerProbe:
    """Resolve `spec` on PATH (or `path`) and run its `--version`; ToolchainError if absent.

    Never memoised: a wrapper (`my-g++`) may run another compiler after a change that leaves its
    own file as it was, and its `--version` shows that. A known launcher `$CXX` starts with
    (`distcc g++`: `launcher.peel`) is kept apart: the compiler behind it is what is probed.
    """
    launcher, words = peel(settings.split_words(spec, env_var))
    if not words:
        raise ToolchainError(f"${env_var} is empty; set it to a C++ compiler such as g++")
    exe = which(words[0], path=path)
    if exe is None:
        raise ToolchainError(f"C++ compiler '{words[0]}' not found on PATH (from ${env_var}={spec!r}); "
                             f"install it or set {env_var} to a compiler that exists")
    exe = os.path.realpath(exe)
    try:
        out = run([exe, *words[1:], "--version"], timeout=VERSION_TIMEOUT_S)
    except OSError as exc:
        raise ToolchainError(f"{exe}: cannot run '--version' ({exc}); check ${env_var}") from None
    if out.timed_out:
        raise ToolchainError(f"{exe}: '--version' did not finish within {VERSION_TIMEOUT_S:g} s (killed); "
                             f"check ${env_var}")
    return CompilerProbe(exe, tuple(words[1:]), (out.stdout or out.stderr).strip(), tuple(launcher),
                         words[0])


def resolve_compiler(spec: str, env_var: str = "CXX", path: str | None = None) -> Compiler:
    """Resolve a compiler command like `g++` or `ccache g++-12` on PATH (or `path`); ToolchainError if absent."""
    probe = probe_compiler(spec, env_var, path)
    identity = text_digest(probe.exe, file_digest(probe.exe), *probe.words, probe.version)
    first = probe.version.splitlines()[0] if probe.version else ""
    return Compiler((probe.exe, *probe.words), identity, first, probe.digest, probe.launcher, probe.named)


_system_dirs: dict[str, tuple[str, ...]] = {}


def system_include_dirs(compiler: Compiler, cxxflags: tuple[str, ...]) -> tuple[str, ...]:
    """The directories the compiler searches for `#include` (its built-in ones and `$CXXFLAGS`'), resolved.

    Asked of the compiler itself (`-x c++ -E -v`, in an empty temporary directory), once per
    compiler identity, flags and environment per process (`--sysroot`, `-nostdinc`, `-m32`, `$CPATH`...
    change them), and kept between runs while the directories its answer named are unchanged
    (`search_dirs`).
    """
    key = search_dirs.key(compiler.identity, compiler.command, cxxflags, os.environ)
    found = _system_dirs.get(key)
    if found is None:
        found = search_dirs.recorded(key)
        if found is None:
            since_ns = time.time_ns()
            found, named = _ask_search_dirs(compiler, cxxflags)
            search_dirs.probed(key, found, named, since_ns)
        _system_dirs[key] = found
    return found


_ERROR_LINE = re.compile(r"\b(fatal )?error\b", re.IGNORECASE)       # `g++: error: ...`, `cc1plus: fatal error: ...`
_NAMED = ('ignoring nonexistent directory "', 'ignoring duplicate directory "', "Found candidate GCC installation: ",
          "Selected GCC installation: ")


def _ask_search_dirs(compiler: Compiler, cxxflags: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """The search directories (resolved) and every absolute path the answer named (listed, ignored,
    considered), for `search_dirs` to watch."""
    import tempfile

    argv = [*compiler.command, *cxxflags, "-x", "c++", "-E", "-v", "-"]
    with tempfile.TemporaryDirectory(prefix="pypto-build-probe-") as scratch:
        try:
            out = run(argv, cwd=scratch, timeout=VERSION_TIMEOUT_S,       # no -M: DEPENDENCIES_OUTPUT would write
                      env={k: v for k, v in os.environ.items() if k not in PROBE_DROPS})
        except OSError as exc:
            raise ToolchainError(f"{compiler.path}: cannot run '-E -v' to list its include directories ({exc}); "
                                 "check $CXX") from None
    dirs: list[str] = []
    named: list[str] = []
    listing = False
    for line in out.stderr.splitlines():
        if line.startswith("#include ") and line.endswith("search starts here:"):
            listing = True
        elif line.startswith("End of search list."):
            return tuple(dict.fromkeys(dirs)), [p for p in dict.fromkeys(named) if os.path.isabs(p)]
        elif listing and line.startswith(" "):
            listed = line.strip().removesuffix(" (framework directory)")
            named.append(listed)
            dirs.append(os.path.realpath(listed))
        elif not listing and line.startswith(_NAMED):
            named.append(line.split('"')[1] if '"' in line else line.partition(": ")[2].strip())
    said = [ln.strip() for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
    if out.returncode != 0:         # it refused: its own error line says why (a bad flag, a missing cc1plus)
        own = next((ln for ln in said if _ERROR_LINE.search(ln)), said[-1] if said else "it said nothing")
        given = f"CXXFLAGS={shlex.join(cxxflags)!r} or $CXX" if cxxflags else "$CXX"
        raise ToolchainError(f"{compiler.path}: {describe(out.returncode)} when asked for its include directories "
                             f"(-x c++ -E -v): {one_line(own, 300)}; fix {given} and run again")
    raise ToolchainError(f"{compiler.path}: '-E -v' did not list its include directories "
                         f"({said[0][:200] if said else 'it said nothing'}); check $CXX and $CXXFLAGS")


def host_compiler(env: dict | None = None) -> Compiler:
    env = os.environ if env is None else env
    return resolve_compiler(env.get("CXX") or "g++", path=env.get("PATH"))


def extra_flags(env: dict | None = None) -> tuple[str, ...]:
    """`$CXXFLAGS`, appended to every compile as make users expect."""
    env = os.environ if env is None else env
    return tuple(settings.words("CXXFLAGS", env))


def argv_key(argv: tuple[str, ...], covered: dict[str, str]) -> str:
    """Digest of a command line with covered roots replaced by placeholders."""
    line = "\0".join(argv)
    for placeholder, root in covered.items():
        line = line.replace(root, placeholder)
    return text_digest(line)


def source_name_problem(source: Path) -> str | None:
    """Why a source cannot be compiled under its file name, or None.

    `procs.path_arg` keeps every path we pass a path, but the GCC driver hands the
    source's bare base name on to cc1plus (`-dumpbase <name>`), which reads any
    argument starting with `@` as a response file: `@k0.cpp` would run what the
    file `k0.cpp` says. No flag moves that name, so such a source is refused.
    """
    if source.name.startswith("@"):
        return ("the name starts with '@', which the compiler would read as a response file of options "
                "(GCC hands a source's base name on to cc1plus)")
    return None
