"""`a2a3` / `a5`: PyPTO's NPU platforms, built with CANN exactly as PyPTO does through simpler.

A kernel is three tasks, each with its own identity: `ccec` compiles it to an
object (ours, under `.pypto_build/<platform>/`), `ld.lld -e kernel_entry` links
it to the image PyPTO keeps as `kernels/<core>/<stem>.o`, and the image's
`.text` (extracted with pyelftools, `elf_payload`: PyPTO's bytes) is the payload
PyPTO reads, `cache/incore_<func_id>_<core>_<stem>_<platform>.bin`. So editing
one kernel re-runs one compile, one link, one extraction. The orchestration of
`tensormap_and_ringbuffer` is cross-compiled with CANN's aarch64 g++ (it runs
on the AICPU); `host_build_graph`'s with the host g++ (it runs in the host
process). Running needs an NPU: simpler's Worker, as on the simulators (`runner.DeviceRunner`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .cann import Cann, locate_cann
from ...builddir.markers import CACHE_DIR, KERNELS_DIR
from ...builddir.state_dir import STATE_DIR
from ...errors import ToolchainError
from ...toolchain.compiler import Compiler
from ...toolchain.driver import keyed
from ..base import PostStep, UnitSource
from .argv import (arch_of, compiler_is_gcc, device_kernel_argv, device_link_argv, orchestration_argv,
                   orchestration_compiler)
from .env import find_simpler
from .noop_key import HOST_CXX
from .places import kernel_payload_path
from .sim import SimplerSimPlatform, bare_compiler, facts

EXTRACTOR = "pypto_build elf_payload 1"      # the payload extraction's identity: bump when its rule changes


@dataclass(frozen=True)
class SimplerDevicePlatform(SimplerSimPlatform):
    """A device platform of simpler, located: the install, CANN, and the host g++ (host_build_graph)."""

    cann: Cann | None = None
    cross: Compiler | None = None     # CANN's aarch64 g++ (tensormap_and_ringbuffer's orchestrations)

    @classmethod
    def locate(cls, env: Mapping[str, str], name: str) -> SimplerDevicePlatform:
        cann = locate_cann(env)                       # one line naming ASCEND_HOME_PATH when it is not there
        install = find_simpler(name)
        if install.pto_isa_root is None:
            raise ToolchainError(f"{name}: {install.pto_isa_problem}")
        ccec = keyed(Compiler((os.fspath(cann.ccec),), cann.identity, cann.version, cann.identity), (), env)
        host = bare_compiler(HOST_CXX, "host_build_graph orchestrations", name, env)
        cross = keyed(Compiler((os.fspath(cann.cross_gxx),), cann.identity, cann.version, cann.identity), (), env)
        return cls(name, install, ccec, host, compiler_is_gcc(host.path), facts(install, ccec, host, cross), cann,
                   cross)

    def _cross(self) -> Compiler:
        assert self.cann is not None and self.cross is not None
        return self.cross

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        if kind == "kernel":
            return self.kernel_compiler
        return self.compiler if runtime == "host_build_graph" else self._cross()

    def _kernel_argv(self, unit: UnitSource, output: str) -> tuple[str, ...]:
        assert self.cann is not None
        extra = [os.path.normpath(os.path.join(unit.sub_dir, d)) for d in unit.include_dirs]
        return device_kernel_argv(self.install, self.cann.home, arch_of(self.name), unit.runtime, unit.core_type,
                                  os.path.join(unit.sub_dir, unit.source), os.path.join(unit.sub_dir, output), extra)

    def _orchestration_argv(self, unit: UnitSource, output: str) -> tuple[str, ...]:
        assert self.cann is not None
        cxx, host_gxx = orchestration_compiler(self.name, unit.runtime, self.cann.home)
        no_gnu_unique = self.no_gnu_unique if host_gxx else compiler_is_gcc(cxx)
        argv = orchestration_argv(self.install, self.name, unit.runtime, cxx, os.path.join(unit.sub_dir, unit.source),
                                  os.path.join(unit.sub_dir, output), host_gxx, no_gnu_unique=no_gnu_unique)
        return (*self.compiler_for("orchestration", unit.runtime).command, *argv[1:])

    def _kernel_output(self, unit: UnitSource) -> str:
        """The compiled object: ours (the link and the extraction make what PyPTO reads, `_steps`)."""
        stem = Path(unit.source).stem
        if unit.external:
            return f"{STATE_DIR}/{self.name}/{CACHE_DIR}/external/{unit.func_id}_{unit.core_type}_{stem}.o"
        return f"{STATE_DIR}/{self.name}/{KERNELS_DIR}/{unit.core_type}/{stem}.o"

    def _steps(self, unit: UnitSource, compiled: str) -> tuple[PostStep, ...]:
        """Link (PyPTO keeps the image as kernels/<core>/<stem>.o), then the payload out of its .text."""
        assert self.cann is not None
        stem, func_id, core_type = Path(unit.source).stem, unit.func_id, unit.core_type
        image = (f"{STATE_DIR}/{self.name}/{CACHE_DIR}/external/{func_id}_{core_type}_{stem}.elf" if unit.external
                 else f"{KERNELS_DIR}/{core_type}/{stem}.o")
        link = device_link_argv(self.cann.home, os.path.join(unit.sub_dir, compiled),
                                os.path.join(unit.sub_dir, image))
        payload = kernel_payload_path(self.name, func_id, core_type, unit.source, unit.external)
        return (PostStep("link", compiled, image, link, self.cann.identity),
                PostStep("extract", image, payload, (), EXTRACTOR))
