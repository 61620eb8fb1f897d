"""The platform seam, in two small interfaces: planning (`Platform`) and execution (`Runner`).

Planning asks a located platform five questions — find the toolchain (`locate`), which compiler builds a
unit kind (`compiler_for`), the command of one unit (`command`: its argv, where the binary goes, where the
command runs, the steps after it), the identities binaries are built under (`binary_context`) and the trees
those identities cover (`covered_roots`) — and reads a few facts (`name`, `runtimes`, `stamp_path`,
`system_dirs`, `noop_record`, the banner's labels). Execution runs a built directory: one L2 program
(`run_l2`) or the host driver of an L3 one (`run_l3`); it needs no toolchain (it runs in the replay child)
and is a separate class in a separate module, so planning never imports it, torch or simpler.
`registry.py` maps a name to both.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping, NamedTuple, Sequence

if TYPE_CHECKING:
    from ..toolchain.identity import BinaryContext
    from ..builddir.runconfig import RunConfig
    from ..toolchain.compiler import Compiler


class PostStep(NamedTuple):
    """A file-to-file step after a kernel's compile (device platforms: the link, then the payload's extraction).
    Paths relative to the sub-build; `argv` empty: done in process; `identity`: the tool's (an input)."""

    kind: str                   # "link" | "extract"
    input: str
    output: str
    argv: tuple[str, ...]
    identity: str


@dataclass(frozen=True)
class UnitSource:
    """One unit as planning found it: what `Platform.command` is asked about. `source` and `include_dirs` are
    relative to the sub-build `sub_dir`, or absolute (an external kernel, a directory outside the build)."""

    kind: str                           # "kernel" | "orchestration"
    source: str
    sub_dir: Path
    runtime: str                        # the sub-build's RUNTIME_CONFIG["runtime"]
    include_dirs: tuple[str, ...] = ()  # a kernel's own -I directories
    func_id: int = 0
    core_type: str = ""                 # "aic" | "aiv" for a kernel
    external: bool = False


@dataclass(frozen=True)
class Command:
    """A platform's answer for one unit: where its binary goes (relative to the sub-build), the command that makes
    it (paths relative to `cwd`), the compiler's working directory, and the steps that turn the binary into what
    runs (none when the compile's output is the payload)."""

    output: str
    argv: tuple[str, ...]
    cwd: Path
    steps: tuple[PostStep, ...] = ()


class Platform(ABC):
    """Planning for one target platform, its toolchain located. Implementations are frozen dataclasses (planning
    keeps one per graph); `name` is what `compiled_meta.json` and `--platform` call it."""

    name: str
    runtimes: ClassVar[tuple[str, ...]]  # the RUNTIME_CONFIG["runtime"] names it can build and run
    system_dirs: tuple[str, ...]        # where its compilers find headers by themselves (resolved): not an escape
    runtime_label: ClassVar[str]        # the runtime binaries run on, as the run's first line names it
    # Whether the no-op record (plan/noop.py) sees every identity input: the package, the compilers
    # (`toolchain_key`), the git checkouts whose clean HEAD is an identity (`watched_checkouts`).
    noop_record: ClassVar[bool] = False
    # Whether kernels may take a precompiled prelude (compile/prelude.py): GCC kernels against PTO-ISA's headers.
    precompiled_preludes: ClassVar[bool] = False
    # When it offers none: why, in `explain --all`'s line (no kernel then says how it last compiled).
    no_preludes_why: ClassVar[str] = "its kernels do not compile with GCC"

    def toolchain_key(self) -> str:
        """The no-op key's part for the toolchain as located (compilers resolved, with their `--version`); the
        `noop_keys.toolchain_key_now` looks the same up without locating."""
        raise NotImplementedError(f"{self.name} keeps no no-op record")

    def watched_checkouts(self) -> tuple[Path, ...]:
        """Git checkouts whose clean HEAD is an identity of this platform's binaries: the no-op record watches
        them (`git_watch`) instead of asking git."""
        return ()

    @property
    @abstractmethod
    def pto_isa_label(self) -> str:
        """Which PTO-ISA kernels compile against and how it was found, for the run's first line."""

    @property
    @abstractmethod
    def stamp_path(self) -> str:
        """The sub-build's binary_context.json for this platform's binaries (relative to the sub-build)."""

    @classmethod
    @abstractmethod
    def locate(cls, env: Mapping[str, str]) -> Platform:
        """Find the toolchain in `env`; ToolchainError naming what is missing and how to fix it."""

    @abstractmethod
    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        """The compiler of one unit kind ("kernel" | "orchestration") of a sub-build using `runtime`: its
        identity is that unit's input."""

    @abstractmethod
    def command(self, unit: UnitSource) -> Command:
        """How `unit` is built here: its output place, its argv (shaped like the runtime's own command line), the
        compiler's working directory (argv paths are relative to it) and the steps after the compile."""

    @abstractmethod
    def covered_roots(self) -> dict[str, str]:
        """Directories whose content an identity already covers, by placeholder: their location is left
        out of argv digests and their headers out of the per-unit header lists."""

    @abstractmethod
    def binary_context(self, runtime_name: str) -> BinaryContext:
        """The identities binaries of one sub-build are built under (cache/binary_context.json)."""


class Runner(ABC):
    """Execution on one platform: run a built directory on `args` (outputs written in place) and return the
    diagnostics files written. Whether the directory is L2 or L3 is the layout's answer, handed in by the caller
    (`run.execution.execute`); nothing here tells them apart again. `say` takes each line for the user: the
    platform's own progress starts with `[execute] ` (hidden by -q), any other is the program's log."""

    def __init__(self, name: str) -> None:
        self.name = name                # the platform's name (a runner serves one platform)

    @abstractmethod
    def run_l2(self, sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None,
               say: Callable[[str], None], on_task: Callable[[str], None] | None) -> list[str]:
        """Run the single-chip program built in `sub_dir` (`on_task` hears each task before it starts)."""

    @abstractmethod
    def run_l3(self, root: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None,
               say: Callable[[str], None], device_ids: Sequence[int] | None) -> list[str]:
        """Run the host driver `orchestration/host_orch.py` of the L3 directory `root` over its chip programs
        (`l3_driver.run_l3` with this platform's backend); `device_ids` None: the sidecar's."""

    def prepare_l3(self) -> None:
        """Start now what `run_l3` will need (the host runtime: the server its rank workers are forked from), so
        that it overlaps the caller's own set-up; returns at once. Nothing, unless a platform has such a thing."""
