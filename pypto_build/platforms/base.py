"""The platform seam, in two small interfaces: planning (`Platform`) and execution (`Runner`).

What a platform is — its name, the names it serves, whether it can serve here, where its classes are — is its
record (`records.py`); `registry.py` maps a name to both classes. Planning asks a located platform four
questions — find the toolchain (`locate`), which compiler builds a unit kind (`compiler_for`), the command of
one unit (`command`: its argv, where the binary goes, where the command runs, the steps after it) and the
identities binaries are built under (`binary_context`) — and reads the rest as data, the same fields for every
platform (`facts`: runtimes, the banner's labels, the stamp's place, system directories, the trees identities
cover, preludes, the no-op key). Execution runs a built directory: one L2 program (`run_l2`) or the host
driver of an L3 one (`run_l3`); it needs no toolchain (it runs in the replay child) and is a separate class in
a separate module, so planning never imports it, torch or simpler.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple, Sequence

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


@dataclass(frozen=True)
class NoopKey:
    """What the no-op record (plan/noop.py) keys and watches for a platform that lets it see every identity
    input: the toolchain as located (`noop_keys.toolchain_key` of the places and compiler probes its light
    `noop_key` module names) and the git checkouts whose clean HEAD is an identity (`git_watch`)."""

    toolchain_key: str
    watched_checkouts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Facts:
    """What planning reads of a located platform besides its answers: data, the same fields for every one."""

    runtimes: tuple[str, ...]           # the RUNTIME_CONFIG["runtime"] names it can build and run
    runtime_label: str                  # the runtime binaries run on, as the run's first line names it
    pto_isa_label: str                  # which PTO-ISA kernels compile against and how it was found (same line)
    stamp_path: str                     # the sub-build's binary_context.json for its binaries (relative to it)
    system_dirs: tuple[str, ...] = ()   # where its compilers find headers by themselves (resolved): not an escape
    # Directories whose content an identity already covers, by placeholder: their location is left out of argv
    # digests and their headers out of the per-unit header lists.
    covered_roots: Mapping[str, str] = field(default_factory=dict)
    # Why kernels take no precompiled prelude here (`explain --all` says it); None: it offers them
    # (compile/prelude.py: GCC kernels against PTO-ISA's headers; the kernel compiler's --version decides).
    no_preludes: str | None = "its kernels do not compile with GCC"
    noop: NoopKey | None = None         # None: the no-op record cannot see every identity input here


class Platform(ABC):
    """Planning for one target platform, its toolchain located. Implementations are frozen dataclasses (planning
    keeps one per graph); `name` is what `compiled_meta.json` and `--platform` call it (its record's)."""

    name: str
    facts: Facts

    @classmethod
    @abstractmethod
    def locate(cls, env: Mapping[str, str], name: str) -> Platform:
        """Find the toolchain in `env` for platform `name`; ToolchainError naming what is missing and how to fix
        it."""

    @abstractmethod
    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        """The compiler of one unit kind ("kernel" | "orchestration") of a sub-build using `runtime`: its
        identity is that unit's input."""

    @abstractmethod
    def command(self, unit: UnitSource) -> Command:
        """How `unit` is built here: its output place, its argv (shaped like the runtime's own command line), the
        compiler's working directory (argv paths are relative to it) and the steps after the compile."""

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

    def prepare(self) -> None:
        """Load now what a run will need and no binary decides (the runtime's own modules), so that it overlaps
        the build of the binaries (`run.prepare`); raises nothing a run would not raise. Nothing by default."""

    def prepare_l3(self) -> None:
        """Start now what `run_l3` will need (the host runtime: the server its rank workers are forked from), so
        that it overlaps the caller's own set-up; returns at once. Nothing, unless a platform has such a thing."""
