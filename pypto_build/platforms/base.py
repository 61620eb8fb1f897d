"""The platform seam: what planning and running ask of a target platform, in one small interface.

A platform says which runtimes it builds (`runtimes`), how to find its toolchain (`locate`), the command line of each
unit kind (`kernel_argv`, `orchestration_argv`), the identities it contributes
(`binary_context`, `covered_roots`, its compiler's identity), where binaries go
(`binary_path`) and how a built directory is executed (`execute`, which must
not need the toolchain: it runs in the replay child). `host` (host.py) is the
first implementation; `registry.py` maps names to implementations.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping, Sequence

if TYPE_CHECKING:
    from ..identity import BinaryContext
    from ..runconfig import RunConfig
    from ..toolchain import Compiler


class Platform(ABC):
    """A target platform with its toolchain located. Implementations are frozen dataclasses (planning
    keeps one per graph); `name` is what `compiled_meta.json` and `--platform` call it."""

    name: str
    runtimes: ClassVar[tuple[str, ...]]  # the RUNTIME_CONFIG["runtime"] names it can build and run
    compiler: Compiler                  # every unit's compiler; its identity is an input of every unit
    system_dirs: tuple[str, ...]        # where the compiler finds headers by itself (resolved): not an escape

    @classmethod
    @abstractmethod
    def locate(cls, env: Mapping[str, str]) -> Platform:
        """Find the toolchain in `env`; ToolchainError naming what is missing and how to fix it."""

    @abstractmethod
    def kernel_argv(self, core_type: str, source: str, output: str, include_dirs: list[str]) -> tuple[str, ...]:
        """The compile command of one kernel (paths relative to its sub-build, the compiler's cwd)."""

    @abstractmethod
    def orchestration_argv(self, source: str, output: str) -> tuple[str, ...]:
        """The compile command of one orchestration (paths relative to its sub-build)."""

    @abstractmethod
    def binary_path(self, source: str) -> str:
        """Where the binary built from `source` goes (both relative to the sub-build)."""

    @property
    @abstractmethod
    def binary_suffix(self) -> str:
        """The file suffix of a built binary (external kernels are named with it under cache/external/)."""

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
        written. Needs no toolchain: it runs in the replay child."""
