"""`a2a3sim` / `a5sim`: PyPTO's simulator platforms, compiled and run exactly as PyPTO does through simpler.

Each kernel and orchestration is its own content-keyed unit, compiled with the
compiler and command line PyPTO's `KernelCompiler` uses (`argv`, run in
simpler's project root) and written where PyPTO reads it: a kernel's payload
(on the simulator the whole `.so`) as `cache/incore_<func_id>_<core>_<stem>_<platform>.bin`,
the orchestration as `orchestration/<stem>.so`, the stamp as `cache/binary_context.json`
with simpler's runtime and PTO-ISA revisions (`env`). So PyPTO's replay
reuses our binaries and ours reuses PyPTO's. Running (`runner`, which planning
never imports) assembles those bytes into simpler's callables, never recompiling through simpler.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Mapping

from ...errors import ToolchainError
from ..installed import choose_host
from ...toolchain.identity import BinaryContext
from ...builddir.markers import STAMP_FILE
from ...toolchain.compiler import Compiler, resolve_compiler, system_include_dirs
from ...toolchain.driver import keyed
from ..base import Command, Facts, NoopKey, Platform, PostStep, UnitSource
from .argv import RUNTIMES, arch_of, compile_cwd, compiler_is_gcc, orchestration_argv, sim_kernel_argv
from .places import kernel_payload_path, orchestration_path
from .env import SimplerInstall, find_simpler
from .noop_key import HOST_CXX, SIM_CXX
from ..noop_keys import toolchain_key


@dataclass(frozen=True)
class SimplerSimPlatform(Platform):
    """A simulator platform of simpler (`name`), located: the install, `g++-15` for kernels and `g++` for
    orchestrations."""

    name: str
    install: SimplerInstall
    kernel_compiler: Compiler
    compiler: Compiler            # the orchestrations' (host g++)
    no_gnu_unique: bool           # simpler's rule: g++ that is not clang gets -fno-gnu-unique
    facts: Facts

    @classmethod
    def locate(cls, env: Mapping[str, str], name: str) -> SimplerSimPlatform:
        install = find_simpler(name)
        if install.pto_isa_root is None:
            raise ToolchainError(f"{name}: {install.pto_isa_problem}")
        kernel = bare_compiler(SIM_CXX, "kernels", name, env)
        orch = bare_compiler(HOST_CXX, "orchestrations", name, env)
        return cls(name, install, kernel, orch, compiler_is_gcc(orch.path), facts(install, kernel, orch))

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        return self.kernel_compiler if kind == "kernel" else self.compiler

    def command(self, unit: UnitSource) -> Command:
        """PyPTO's `KernelCompiler` command line, run in simpler's project root, writing where PyPTO reads."""
        if unit.kind == "kernel":
            output = self._kernel_output(unit)
            return Command(output, self._kernel_argv(unit, output), compile_cwd(self.install),
                           self._steps(unit, output))
        output = orchestration_path(unit.source)
        return Command(output, self._orchestration_argv(unit, output), compile_cwd(self.install))

    def _kernel_output(self, unit: UnitSource) -> str:
        return kernel_payload_path(self.name, unit.func_id, unit.core_type, unit.source, unit.external)

    def _kernel_argv(self, unit: UnitSource, output: str) -> tuple[str, ...]:
        sub_dir = unit.sub_dir
        extra = [os.path.normpath(os.path.join(sub_dir, d)) for d in unit.include_dirs]
        argv = sim_kernel_argv(self.install, arch_of(self.name), unit.runtime, unit.core_type,
                               os.path.join(sub_dir, unit.source), os.path.join(sub_dir, output), extra)
        return (*self.kernel_compiler.command, *argv[1:])

    def _orchestration_argv(self, unit: UnitSource, output: str) -> tuple[str, ...]:
        argv = orchestration_argv(self.install, self.name, unit.runtime, HOST_CXX,
                                  os.path.join(unit.sub_dir, unit.source), os.path.join(unit.sub_dir, output), True,
                                  no_gnu_unique=self.no_gnu_unique)
        return (*self.compiler.command, *argv[1:])

    def _steps(self, unit: UnitSource, compiled: str) -> tuple[PostStep, ...]:
        """On a simulator the compiled `.so` is the payload: no step after it."""
        return ()

    def binary_context(self, runtime_name: str) -> BinaryContext:
        return BinaryContext(self.name, runtime_name, self.install.runtime_revision, self.install.pto_isa_revision)


def facts(install: SimplerInstall, kernel: Compiler, orch: Compiler, *more: Compiler) -> Facts:
    """What planning reads of a platform of simpler located at `install`, with the kernels' compiler, the host
    g++ (`orch`) and any other compiler it runs (`more`: a device's cross g++). simpler's tree and the PTO-ISA
    tree are identity-covered (their clean revisions). The no-op record sees every identity input only in a
    checkout of simpler (both identities are clean HEADs it can watch; a wheel's build commit is read from a
    native module it does not see), keyed as `noop_key.places` and `compilers` order them: the project root,
    simpler_setup, the PTO-ISA tree; the kernels' compiler, the host g++."""
    root, pto_isa = install.project_root, install.pto_isa_root
    noop = None
    if (root / ".git").exists():
        key = toolchain_key([str(root), str(install.setup_dir), str(pto_isa)], [kernel.probe, orch.probe])
        noop = NoopKey(key, (root, pto_isa) if pto_isa else ())
    dirs = tuple(dict.fromkeys(d for c in (kernel, orch, *more) for d in system_include_dirs(c, ())))
    return Facts(RUNTIMES, "simpler", f"simpler's managed tree {pto_isa}", STAMP_FILE, dirs,
                 {"<simpler>": str(root), "<pto-isa>": str(pto_isa)}, None, noop)


def bare_compiler(cxx: str, what: str, platform: str, env: Mapping[str, str]) -> Compiler:
    """A compiler simpler names by its bare name, found on PATH as simpler finds it; one line when absent."""
    if shutil.which(cxx, path=env.get("PATH")) is None:
        raise ToolchainError(f"{cxx} not found on PATH: simpler compiles {platform} {what} with {cxx}; install it "
                             f"(or put a {cxx} on PATH), or "
                             + choose_host())
    return keyed(resolve_compiler(cxx, path=env.get("PATH")), (), env)
