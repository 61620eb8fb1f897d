"""`host`: our own CPU runtime, compiled with the host C++ compiler (`$CXX`, default g++).

Kernels and orchestrations are compiled to `.so` files shaped like simpler's
CPU-sim command lines, against the headers the package ships
(`runtime/host/include`, and `PTO_ISA_ROOT` when set); they run in
`runtime.HostExecutor` (L2) or the host driver with one worker process per
device (L3).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ClassVar, Mapping, Sequence

from ..errors import ToolchainError
from ..markers import HOST_STAMP, host_binary, host_external_binary
from ..identity import BinaryContext, Revision, clean_git_revision, host_runtime_revision
from ..procs import path_arg
from ..runconfig import LOG_LEVELS, RunConfig
from ..toolchain import PACKAGE_DIR, Compiler, extra_flags, host_compiler, system_include_dirs
from .base import Platform

HOST_INCLUDE = PACKAGE_DIR / "runtime" / "host" / "include"
HOST_FALLBACK = PACKAGE_DIR / "runtime" / "host" / "fallback"


@dataclass(frozen=True)
class HostPlatform(Platform):
    """The host platform with its compiler, `$CXXFLAGS` and `PTO_ISA_ROOT` (None: the fallback headers)."""

    compiler: Compiler
    cxxflags: tuple[str, ...]
    pto_isa_root: Path | None
    system_dirs: tuple[str, ...] = ()
    name: str = "host"
    # host_build_graph runs its orchestration on the host with Graph-Execution ops the host runtime lacks
    runtimes: ClassVar[tuple[str, ...]] = ("tensormap_and_ringbuffer",)
    noop_record: ClassVar[bool] = True
    runtime_label: ClassVar[str] = "pypto_build host runtime"

    @property
    def pto_isa_label(self) -> str:
        if self.pto_isa_root is None:
            return "none (PTO_ISA_ROOT unset: the host runtime's fallback headers)"
        return f"PTO_ISA_ROOT={self.pto_isa_root}"

    @classmethod
    def locate(cls, env: Mapping[str, str]) -> HostPlatform:
        pto = env.get("PTO_ISA_ROOT") or None
        pto_root = Path(pto).resolve() if pto else None
        if pto_root is not None and not (pto_root / "include").is_dir():
            raise ToolchainError(f"PTO_ISA_ROOT={pto}: no include/ directory there; point PTO_ISA_ROOT at a "
                                 "pto-isa checkout or unset it")
        compiler, flags = host_compiler(env), extra_flags(env)
        return cls(compiler, flags, pto_root, system_include_dirs(compiler, flags))

    # Apart from PyPTO's places (markers.HOST_OUTPUTS): PyPTO never builds for host, and a host build must
    # not overwrite the binaries and stamp PyPTO reads for the platform the directory records.
    def kernel_binary(self, func_id: int, core_type: str, source: str, external: bool) -> str:
        return host_external_binary(func_id, core_type, Path(source).stem) if external else host_binary(source)

    def orchestration_binary(self, source: str) -> str:
        return host_binary(source)

    @property
    def stamp_path(self) -> str:
        return HOST_STAMP

    def kernel_argv(self, core_type: str, source: str, output: str, include_dirs: list[str], *,
                    sub_dir: Path, runtime: str) -> tuple[str, ...]:
        """Shaped like simpler's CPU-sim kernel command line."""
        std = "-std=c++20" if self.pto_isa_root else "-std=c++17"
        dav = "-D__DAV_VEC__" if core_type == "aiv" else "-D__DAV_CUBE__"
        incs: list[str] = []
        if self.pto_isa_root:
            incs += [f"-I{self.pto_isa_root / 'include'}", f"-I{self.pto_isa_root / 'include' / 'pto'}"]
        incs.append(f"-I{HOST_INCLUDE}")
        if not self.pto_isa_root:
            incs.append(f"-I{HOST_FALLBACK}")
        incs += [f"-I{path_arg(d)}" for d in include_dirs]
        return (*self.compiler.command, "-shared", "-fPIC", "-O2", std, "-fpermissive",
                "-Wno-ignored-attributes", "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", "-DNDEBUG", dav,
                *incs, *self.cxxflags, "-o", path_arg(output), path_arg(source))

    def orchestration_argv(self, source: str, output: str, *, sub_dir: Path, runtime: str) -> tuple[str, ...]:
        """Shaped like simpler's host g++ orchestration command line."""
        return (*self.compiler.command, "-shared", "-fPIC", "-O2", "-g", "-std=c++17",
                "-Wl,--build-id=sha1", "-pthread", f"-I{HOST_INCLUDE}", *self.cxxflags,
                "-o", path_arg(output), path_arg(source))

    def covered_roots(self) -> dict[str, str]:
        """The package's host runtime (its revision digests every file) and the PTO-ISA checkout (its
        clean git revision): moving either does not by itself make binaries stale."""
        roots = {"<pypto_build-host-runtime>": str(HOST_INCLUDE.parent)}
        if self.pto_isa_root:
            roots["<PTO_ISA_ROOT>"] = str(self.pto_isa_root)
        return roots

    def binary_context(self, runtime_name: str) -> BinaryContext:
        pto_isa = Revision("none") if self.pto_isa_root is None else clean_git_revision(self.pto_isa_root)
        return BinaryContext(self.name, runtime_name, host_runtime_revision(), pto_isa)

    @staticmethod
    def execute(sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
                say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None,
                on_task: Callable[[str], None] | None = None) -> list[str]:
        """L3 (no kernel_config.py, an orchestration/host_orch.py: PyPTO's rule) runs the host driver with
        one worker process per device id; L2 runs in this process."""
        from ..runtime import HostExecutor, run_distributed, write_args_dump, write_swimlane

        for line in config.unsupported():
            say(line)
        say("[execute] running on the host runtime (pypto_build: a functional CPU reference, not an NPU model)...")
        if not (sub_dir / "kernel_config.py").exists() and (sub_dir / "orchestration" / "host_orch.py").exists():
            from ..sidecars import load_distributed_meta
            ids = device_ids or load_distributed_meta(sub_dir / "distributed_meta.json").distributed_config.device_ids
            if on_task is not None:
                on_task("the host driver orchestration/host_orch.py")
            return run_distributed(sub_dir, args, config=config, device_ids=ids, say=say)
        threshold = LOG_LEVELS.index(config.effective_log_level)

        def log(level: str, text: str) -> None:
            if level == "always" or (level in LOG_LEVELS and LOG_LEVELS.index(level) >= threshold and level != "null"):
                say(f"[{level}] {text}")

        want_trace = bool(config.enable_chip_swimlane or config.enable_dump_args)
        with HostExecutor(sub_dir, log=log, on_task=on_task) as executor:
            trace = executor.run(args, param_names=names, trace=want_trace)
        written = []
        dfx = sub_dir / "dfx_outputs"
        if config.enable_chip_swimlane:
            path = dfx / f"merged_swimlane_{time.strftime('%Y%m%d_%H%M%S')}.json"
            write_swimlane(trace, path)
            written.append(str(path))
        if config.enable_dump_args:
            written.append(str(write_args_dump(trace, dfx / "args_dump")))
        return written
