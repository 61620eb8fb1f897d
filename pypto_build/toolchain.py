"""Compilers and the command lines each platform compiles with.

Pure planning: `kernel_argv` / `orchestration_argv` return the canonical argv
(paths relative to the sub-build, which is the compiler's cwd, each passed
through `procs.path_arg` so a file name is never an option) that goes into
each unit's identity. `Compiler.identity` is the resolved path, a digest of
the binary and its `--version` text, so replacing or upgrading the compiler
recompiles everything.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import settings
from .errors import ToolchainError
from .hashing import file_digest, text_digest
from .procs import path_arg, run

PACKAGE_DIR = Path(__file__).resolve().parent
HOST_INCLUDE = PACKAGE_DIR / "runtime" / "host" / "include"
HOST_FALLBACK = PACKAGE_DIR / "runtime" / "host" / "fallback"
PLATFORMS = ("host", "a2a3sim", "a5sim", "a2a3", "a5")
DEFAULT_PLATFORM = "host"
VERSION_TIMEOUT_S = 30.0


def default_platform() -> str:
    """`$PYPTO_BUILD_PLATFORM`, else host."""
    return os.environ.get("PYPTO_BUILD_PLATFORM") or DEFAULT_PLATFORM


@dataclass(frozen=True)
class Compiler:
    """A resolved C++ compiler command (`$CXX` may carry a launcher or flags)."""

    command: tuple[str, ...]   # as configured, first word resolved to an absolute path
    identity: str              # digest of path + binary + --version
    version: str               # first line of --version

    @property
    def path(self) -> str:
        return self.command[0]


_compilers: dict[tuple, Compiler] = {}


def resolve_compiler(spec: str, env_var: str = "CXX") -> Compiler:
    """Resolve a compiler command like `g++` or `ccache g++-12`; ToolchainError if absent.

    Memoised per process on the binary's stat, so a replaced compiler is seen.
    """
    words = settings.split_words(spec, env_var)
    if not words:
        raise ToolchainError(f"${env_var} is empty; set it to a C++ compiler such as g++")
    exe = shutil.which(words[0])
    if exe is None:
        raise ToolchainError(f"C++ compiler '{words[0]}' not found on PATH (from ${env_var}={spec!r}); "
                             f"install it or set {env_var} to a compiler that exists")
    exe = os.path.realpath(exe)
    st = os.stat(exe)
    key = (spec, exe, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _compilers:
        return _compilers[key]
    try:
        out = run([exe, *words[1:], "--version"], timeout=VERSION_TIMEOUT_S)
    except OSError as exc:
        raise ToolchainError(f"{exe}: cannot run '--version' ({exc}); check ${env_var}") from None
    if out.timed_out:
        raise ToolchainError(f"{exe}: '--version' did not finish within {VERSION_TIMEOUT_S:g} s (killed); "
                             f"check ${env_var}")
    version = (out.stdout or out.stderr).strip()
    identity = text_digest(exe, file_digest(exe), *words[1:], version)
    compiler = Compiler((exe, *words[1:]), identity, version.splitlines()[0] if version else "")
    _compilers[key] = compiler
    return compiler


def host_compiler(env: dict | None = None) -> Compiler:
    env = os.environ if env is None else env
    return resolve_compiler(env.get("CXX") or "g++")


def extra_flags(env: dict | None = None) -> tuple[str, ...]:
    """`$CXXFLAGS`, appended to every compile as make users expect."""
    env = os.environ if env is None else env
    return tuple(settings.words("CXXFLAGS", env))


@dataclass(frozen=True)
class Platform:
    """Everything a platform needs to plan compiles."""

    name: str
    compiler: Compiler
    cxxflags: tuple[str, ...]
    pto_isa_root: Path | None

    @property
    def binary_suffix(self) -> str:
        return ".so"

    def covered_roots(self) -> dict[str, str]:
        """Directories whose content an identity already covers, by placeholder.

        Their location is left out of argv digests and their headers out of the
        per-unit header lists, so moving the package or the PTO-ISA checkout
        does not by itself make binaries stale.
        """
        roots = {"<pypto_build-host-runtime>": str(HOST_INCLUDE.parent)}
        if self.pto_isa_root:
            roots["<PTO_ISA_ROOT>"] = str(self.pto_isa_root)
        return roots


def argv_key(argv: tuple[str, ...], covered: dict[str, str]) -> str:
    """Digest of a command line with covered roots replaced by placeholders."""
    line = "\0".join(argv)
    for placeholder, root in covered.items():
        line = line.replace(root, placeholder)
    return text_digest(line)


def host_platform(env: dict | None = None) -> Platform:
    env = os.environ if env is None else env
    pto = env.get("PTO_ISA_ROOT") or None
    pto_root = Path(pto).resolve() if pto else None
    if pto_root is not None and not (pto_root / "include").is_dir():
        raise ToolchainError(f"PTO_ISA_ROOT={pto}: no include/ directory there; point PTO_ISA_ROOT at a "
                             "pto-isa checkout or unset it")
    return Platform("host", host_compiler(env), extra_flags(env), pto_root)


def load_platform(name: str, env: dict | None = None) -> Platform:
    """The platform called `name`, or ToolchainError naming what is missing."""
    if name == "host":
        return host_platform(env)
    if name in PLATFORMS:
        raise ToolchainError(
            f"platform {name!r} needs PyPTO's runtime toolchain (simpler, PTO-ISA"
            f"{', ccec' if not name.endswith('sim') else ''}), which this version of pypto_build does not drive yet; "
            "use --platform host")
    raise ToolchainError(f"unknown platform {name!r}; choose one of {', '.join(PLATFORMS)}")


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


def kernel_argv(platform: Platform, core_type: str, source: str, output: str,
                include_dirs: list[str]) -> tuple[str, ...]:
    """Host kernel compile, shaped like simpler's CPU-sim command line."""
    std = "-std=c++20" if platform.pto_isa_root else "-std=c++17"
    dav = "-D__DAV_VEC__" if core_type == "aiv" else "-D__DAV_CUBE__"
    incs: list[str] = []
    if platform.pto_isa_root:
        incs += [f"-I{platform.pto_isa_root / 'include'}", f"-I{platform.pto_isa_root / 'include' / 'pto'}"]
    incs.append(f"-I{HOST_INCLUDE}")
    if not platform.pto_isa_root:
        incs.append(f"-I{HOST_FALLBACK}")
    incs += [f"-I{path_arg(d)}" for d in include_dirs]
    return (*platform.compiler.command, "-shared", "-fPIC", "-O2", std, "-fpermissive",
            "-Wno-ignored-attributes", "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", "-DNDEBUG", dav,
            *incs, *platform.cxxflags, "-o", path_arg(output), path_arg(source))


def orchestration_argv(platform: Platform, source: str, output: str) -> tuple[str, ...]:
    """Host orchestration compile, shaped like simpler's host g++ command line."""
    return (*platform.compiler.command, "-shared", "-fPIC", "-O2", "-g", "-std=c++17",
            "-Wl,--build-id=sha1", "-pthread", f"-I{HOST_INCLUDE}", *platform.cxxflags,
            "-o", path_arg(output), path_arg(source))
