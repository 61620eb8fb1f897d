"""`a2a3sim` / `a5sim`: PyPTO's simulator platforms, compiled and run exactly as PyPTO does through simpler.

Each kernel and orchestration is its own content-keyed unit, compiled with the
compiler and command line PyPTO's `KernelCompiler` uses (`simpler_argv`, run in
simpler's project root) and written where PyPTO reads it: a kernel's payload
(on the simulator the whole `.so`) as `cache/incore_<func_id>_<core>_<stem>_<platform>.bin`,
the orchestration as `orchestration/<stem>.so`, the stamp as `cache/binary_context.json`
with simpler's runtime and PTO-ISA revisions (`simpler_env`). So PyPTO's replay
reuses our binaries and ours reuses PyPTO's. Running assembles those bytes into
simpler's callables (`simpler_run`), never recompiling through simpler.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Mapping, Sequence

from ..errors import ToolchainError
from ..identity import BinaryContext
from ..runconfig import RunConfig
from ..stamp import STAMP
from ..toolchain import Compiler, resolve_compiler, system_include_dirs
from .base import Platform
from .simpler_argv import (HOST_CXX, RUNTIMES, SIM_CXX, arch_of, compiler_is_gcc, orchestration_argv,
                           sim_kernel_argv)
from .pypto_places import kernel_payload_path, orchestration_path
from .simpler_env import SimplerInstall, find_simpler


@dataclass(frozen=True)
class SimplerSimPlatform(Platform):
    """A simulator platform of simpler, located: the install, `g++-15` for kernels and `g++` for orchestrations."""

    install: SimplerInstall
    kernel_compiler: Compiler
    compiler: Compiler            # the orchestrations' (host g++)
    no_gnu_unique: bool           # simpler's rule: g++ that is not clang gets -fno-gnu-unique
    system_dirs: tuple[str, ...] = ()
    name: ClassVar[str] = ""
    runtimes: ClassVar[tuple[str, ...]] = RUNTIMES
    runtime_label: ClassVar[str] = "simpler"

    @classmethod
    def locate(cls, env: Mapping[str, str]) -> SimplerSimPlatform:
        install = find_simpler()
        if install.pto_isa_root is None:
            raise ToolchainError(f"{cls.name}: {install.pto_isa_problem}")
        kernel = bare_compiler(SIM_CXX, "kernels", cls.name, env)
        orch = bare_compiler(HOST_CXX, "orchestrations", cls.name, env)
        dirs = tuple(dict.fromkeys([*system_include_dirs(kernel, ()), *system_include_dirs(orch, ())]))
        return cls(install, kernel, orch, compiler_is_gcc(orch.path), dirs)

    @property
    def pto_isa_label(self) -> str:
        return f"simpler's managed tree {self.install.pto_isa_root}"

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        return self.kernel_compiler if kind == "kernel" else self.compiler

    def compile_cwd(self, sub_dir: Path) -> Path:
        return self.install.project_root

    def kernel_argv(self, core_type: str, source: str, output: str, include_dirs: list[str], *,
                    sub_dir: Path, runtime: str) -> tuple[str, ...]:
        extra = [os.path.normpath(os.path.join(sub_dir, d)) for d in include_dirs]
        argv = sim_kernel_argv(self.install, arch_of(self.name), runtime, core_type, os.path.join(sub_dir, source),
                               os.path.join(sub_dir, output), extra)
        return (*self.kernel_compiler.command, *argv[1:])

    def orchestration_argv(self, source: str, output: str, *, sub_dir: Path, runtime: str) -> tuple[str, ...]:
        argv = orchestration_argv(self.install, self.name, runtime, HOST_CXX, os.path.join(sub_dir, source),
                                  os.path.join(sub_dir, output), True, no_gnu_unique=self.no_gnu_unique)
        return (*self.compiler.command, *argv[1:])

    def kernel_binary(self, func_id: int, core_type: str, source: str, external: bool) -> str:
        return kernel_payload_path(self.name, func_id, core_type, source, external)

    def orchestration_binary(self, source: str) -> str:
        return orchestration_path(source)

    @property
    def stamp_path(self) -> str:
        return STAMP

    def covered_roots(self) -> dict[str, str]:
        """simpler's tree (its clean revision) and the PTO-ISA tree (its clean revision)."""
        return {"<simpler>": str(self.install.project_root), "<pto-isa>": str(self.install.pto_isa_root)}

    def binary_context(self, runtime_name: str) -> BinaryContext:
        return BinaryContext(self.name, runtime_name, self.install.runtime_revision, self.install.pto_isa_revision)

    @staticmethod
    def execute(sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
                say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None,
                on_task: Callable[[str], None] | None = None) -> list[str]:
        """Our binaries, assembled into simpler's callables and run by simpler's Worker."""
        from ..manifest import read_kernel_config
        from .simpler_run import run_on_simpler

        if not (sub_dir / "kernel_config.py").exists() and (sub_dir / "orchestration" / "host_orch.py").exists():
            from .simpler_l3 import run_l3_on_simpler      # PyPTO's rule: L3 is a host driver over chip programs

            if on_task is not None:
                on_task("the host driver orchestration/host_orch.py")
            return run_l3_on_simpler(sub_dir, config.platform, args, config, names=names, say=say,
                                     device_ids=device_ids)
        cfg = read_kernel_config(sub_dir / "kernel_config.py")
        payloads = {k.func_id: sub_dir / kernel_payload_path(config.platform, k.func_id, k.core_type, k.source,
                                                             k.external) for k in cfg.kernels}
        orch = sub_dir / orchestration_path(cfg.orchestration.source)
        return run_on_simpler(sub_dir, config.platform, payloads, orch, args, config, names=names, say=say,
                              device_id=config.device_id)


def bare_compiler(cxx: str, what: str, platform: str, env: Mapping[str, str]) -> Compiler:
    """A compiler simpler names by its bare name, found on PATH as simpler finds it; one line when absent."""
    if shutil.which(cxx, path=env.get("PATH")) is None:
        raise ToolchainError(f"{cxx} not found on PATH: simpler compiles {platform} {what} with {cxx}; install it "
                             f"(or put a {cxx} on PATH), or pass --platform host")
    return resolve_compiler(cxx, path=env.get("PATH"))


@dataclass(frozen=True)
class A2a3SimPlatform(SimplerSimPlatform):
    name: ClassVar[str] = "a2a3sim"


@dataclass(frozen=True)
class A5SimPlatform(SimplerSimPlatform):
    name: ClassVar[str] = "a5sim"
