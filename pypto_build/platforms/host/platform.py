"""`host`: our own CPU runtime, compiled with the host C++ compiler (`$CXX`, default g++).

Kernels and orchestrations are compiled to `.so` files shaped like simpler's
CPU-sim command lines, against the headers the package ships
(`platforms/host/headers/include`, and `PTO_ISA_ROOT` when set); they run in
`runtime.HostExecutor` (L2) or the L3 driver with one worker process per
device (L3): `run.HostRunner`, which planning never imports.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...errors import ToolchainError
from .places import HOST_STAMP, host_binary, host_external_binary
from ...toolchain.identity import BinaryContext, Revision, clean_git_revision, host_runtime_revision
from ...core.procs import path_arg
from ...toolchain.compiler import PACKAGE_DIR, Compiler, extra_flags, host_compiler, system_include_dirs
from ...toolchain.driver import keyed
from ..base import Command, Facts, NoopKey, Platform, UnitSource
from .noop_key import places
from ..noop_keys import toolchain_key

HOST_INCLUDE = PACKAGE_DIR / "platforms" / "host" / "headers" / "include"
HOST_FALLBACK = PACKAGE_DIR / "platforms" / "host" / "headers" / "fallback"
# host_build_graph runs its orchestration on the host with Graph-Execution ops the host runtime lacks
RUNTIMES = ("tensormap_and_ringbuffer",)
RUNTIME_LABEL = "pypto_build host runtime"
NO_PRELUDES = ("the host platform offers them only with PTO_ISA_ROOT set (PTO-ISA's headers) and a GCC kernel "
               "compiler")


@dataclass(frozen=True)
class HostPlatform(Platform):
    """The host platform with its compiler, `$CXXFLAGS` and `PTO_ISA_ROOT` (None: the fallback headers)."""

    compiler: Compiler
    cxxflags: tuple[str, ...]
    pto_isa_root: Path | None
    facts: Facts
    name: str = "host"

    @classmethod
    def locate(cls, env: Mapping[str, str], name: str = "host") -> HostPlatform:
        pto, (resolved,) = env.get("PTO_ISA_ROOT") or None, places(env)
        pto_root = Path(resolved) if resolved else None
        if pto_root is not None and not (pto_root / "include").is_dir():
            raise ToolchainError(f"PTO_ISA_ROOT={pto}: no include/ directory there; point PTO_ISA_ROOT at a "
                                 "pto-isa checkout or unset it")
        flags = extra_flags(env)
        compiler = keyed(host_compiler(env), flags, env)      # with the environment and programs it compiles with
        return cls(compiler, flags, pto_root, _facts(compiler, flags, pto_root), name)

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        return self.compiler

    def command(self, unit: UnitSource) -> Command:
        """Shaped like simpler's CPU-sim command lines (a kernel's, or the host g++ orchestration's), run in the
        sub-build. Outputs apart from PyPTO's places (places.HOST_OUTPUTS): PyPTO never builds for host, and a
        host build must not overwrite the binaries and stamp PyPTO reads for the platform the directory records."""
        if unit.kind == "kernel":
            output = (host_external_binary(unit.func_id, unit.core_type, Path(unit.source).stem) if unit.external
                      else host_binary(unit.source))
            return Command(output, self._kernel_argv(unit, output), unit.sub_dir)
        output = host_binary(unit.source)
        return Command(output, (*self.compiler.command, "-shared", "-fPIC", "-O2", "-g", "-std=c++17",
                                "-Wl,--build-id=sha1", "-pthread", f"-I{HOST_INCLUDE}", *self.cxxflags,
                                "-o", path_arg(output), path_arg(unit.source)), unit.sub_dir)

    def _kernel_argv(self, unit: UnitSource, output: str) -> tuple[str, ...]:
        std = "-std=c++20" if self.pto_isa_root else "-std=c++17"
        dav = "-D__DAV_VEC__" if unit.core_type == "aiv" else "-D__DAV_CUBE__"
        incs: list[str] = []
        if self.pto_isa_root:
            incs += [f"-I{self.pto_isa_root / 'include'}", f"-I{self.pto_isa_root / 'include' / 'pto'}"]
        incs.append(f"-I{HOST_INCLUDE}")
        if not self.pto_isa_root:
            incs.append(f"-I{HOST_FALLBACK}")
        incs += [f"-I{path_arg(d)}" for d in unit.include_dirs]
        return (*self.compiler.command, "-shared", "-fPIC", "-O2", std, "-fpermissive",
                "-Wno-ignored-attributes", "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", "-DNDEBUG", dav,
                *incs, *self.cxxflags, "-o", path_arg(output), path_arg(unit.source))

    def binary_context(self, runtime_name: str) -> BinaryContext:
        pto_isa = Revision("none") if self.pto_isa_root is None else clean_git_revision(self.pto_isa_root)
        return BinaryContext(self.name, runtime_name, host_runtime_revision(), pto_isa)


def _facts(compiler: Compiler, flags: tuple[str, ...], pto_root: Path | None) -> Facts:
    """What planning reads of the host platform located with `compiler` and `PTO_ISA_ROOT` (`pto_root`): the
    package's host runtime (its revision digests every file) and the PTO-ISA checkout (its clean git revision)
    are identity-covered, so moving either does not by itself make binaries stale; preludes with PTO-ISA's
    headers only (the fallback ones are too small to be worth one); the no-op key as `noop_key.places` and
    `compilers` have it (the resolved checkout, `$CXX`), watching the checkout's clean HEAD."""
    covered = {"<pypto_build-host-runtime>": str(HOST_INCLUDE.parent)}
    if pto_root:
        covered["<PTO_ISA_ROOT>"] = str(pto_root)
    label = ("none (PTO_ISA_ROOT unset: the host runtime's fallback headers)" if pto_root is None
             else f"PTO_ISA_ROOT={pto_root}")
    key = toolchain_key([None if pto_root is None else str(pto_root)], [compiler.probe])
    return Facts(RUNTIMES, RUNTIME_LABEL, label, HOST_STAMP, system_include_dirs(compiler, flags), covered,
                 None if pto_root else NO_PRELUDES, NoopKey(key, () if pto_root is None else (pto_root,)))
