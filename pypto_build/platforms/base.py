"""The platform seam: what planning and running ask of a target platform, in one small interface.

A platform says which runtimes it builds (`runtimes`), how to find its toolchain (`locate`), the command line of each
unit kind (`kernel_argv`, `orchestration_argv`), the identities it contributes
(`binary_context`, `covered_roots`, its compiler's identity), where binaries go
(`kernel_binary`, `orchestration_binary`, `stamp_path`) and how a built directory is executed (`execute`, which must
not need the toolchain: it runs in the replay child). `host` (host.py) is the
first implementation; `registry.py` maps names to implementations.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping, NamedTuple, Sequence

if TYPE_CHECKING:
    from ..identity import BinaryContext
    from ..runconfig import RunConfig
    from ..toolchain import Compiler


class PostStep(NamedTuple):
    """A file-to-file step after a kernel's compile (device platforms: the link, then the payload's extraction).
    Paths relative to the sub-build; `argv` empty: done in process; `identity`: the tool's (an input)."""

    kind: str                   # "link" | "extract"
    input: str
    output: str
    argv: tuple[str, ...]
    identity: str


class Platform(ABC):
    """A target platform with its toolchain located. Implementations are frozen dataclasses (planning
    keeps one per graph); `name` is what `compiled_meta.json` and `--platform` call it."""

    name: str
    runtimes: ClassVar[tuple[str, ...]]  # the RUNTIME_CONFIG["runtime"] names it can build and run
    compiler: Compiler                  # every unit's compiler; its identity is an input of every unit
    system_dirs: tuple[str, ...]        # where the compiler finds headers by itself (resolved): not an escape

    runtime_label: ClassVar[str]        # the runtime binaries run on, as the run's first line names it
    # Whether the no-op record (engine/noop.py) sees every identity input: the package, $CXX, PTO_ISA_ROOT unset.
    # A toolchain tree whose revision only a git status can tell (simpler's) keeps every run on the full path.
    noop_record: ClassVar[bool] = False

    @property
    @abstractmethod
    def pto_isa_label(self) -> str:
        """Which PTO-ISA kernels compile against and how it was found, for the run's first line."""

    @classmethod
    @abstractmethod
    def locate(cls, env: Mapping[str, str]) -> Platform:
        """Find the toolchain in `env`; ToolchainError naming what is missing and how to fix it."""

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        """The compiler of one unit kind ("kernel" | "orchestration") of a sub-build using `runtime`: its
        identity is that unit's input."""
        return self.compiler

    def post_steps(self, func_id: int, core_type: str, source: str, external: bool, compiled: str, *,
                   sub_dir: Path) -> tuple[PostStep, ...]:
        """What turns a kernel's compiled output (`compiled`, from `kernel_binary`) into what runs; none
        when the compile's output is the payload."""
        return ()

    def compile_cwd(self, sub_dir: Path) -> Path:
        """The compiler's working directory for units of `sub_dir`; argv paths are relative to it."""
        return sub_dir

    @abstractmethod
    def kernel_argv(self, core_type: str, source: str, output: str, include_dirs: list[str], *,
                    sub_dir: Path, runtime: str) -> tuple[str, ...]:
        """The compile command of one kernel of a sub-build using `runtime` (RUNTIME_CONFIG["runtime"]); paths
        relative to the sub-build `sub_dir`, which this method makes relative to `compile_cwd` when that differs."""

    @abstractmethod
    def orchestration_argv(self, source: str, output: str, *, sub_dir: Path, runtime: str) -> tuple[str, ...]:
        """The compile command of one orchestration (paths as for `kernel_argv`)."""

    @abstractmethod
    def kernel_binary(self, func_id: int, core_type: str, source: str, external: bool) -> str:
        """Where a kernel's binary goes, relative to the sub-build (`source`: relative to it, or absolute for
        an external kernel, which has no place beside its source)."""

    @abstractmethod
    def orchestration_binary(self, source: str) -> str:
        """Where the orchestration's binary goes (both relative to the sub-build)."""

    @property
    @abstractmethod
    def stamp_path(self) -> str:
        """The sub-build's binary_context.json for this platform's binaries (relative to the sub-build)."""

    @abstractmethod
    def covered_roots(self) -> dict[str, str]:
        """Directories whose content an identity already covers, by placeholder: their location is left
        out of argv digests and their headers out of the per-unit header lists."""

    @abstractmethod
    def binary_context(self, runtime_name: str) -> BinaryContext:
        """The identities binaries of one sub-build are built under (cache/binary_context.json)."""

    @staticmethod
    @abstractmethod
    def execute(sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None,
                say: Callable[[str], None], device_ids: Sequence[int] | None,
                on_task: Callable[[str], None] | None) -> list[str]:
        """Run the built directory `sub_dir` on `args` (outputs written in place); the diagnostics files
        written. Needs no toolchain: it runs in the replay child. `say` takes each line for the user: the
        platform's own progress starts with `[execute] ` (hidden by -q), any other is the program's log."""
