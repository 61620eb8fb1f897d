"""What the plan hands the run stage: each runnable program of a build directory (`Program`).

Planning classifies the directory once (`builddir.layout`) and chooses the platform once; a `Program`
carries both to every later stage — the `replay:`/`validate:` tasks, `compat.replay`, `watch`, the program
objects — so none of them classifies the directory again or copies the platform into a `RunConfig` by
hand (`Program.config` is the one place). A `BuildResult` carries them as plain data (`Program.encode`:
the no-op record keeps them too, so a run the record answered can still hand the run its programs).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..builddir.layout import BuildKind
from ..builddir.runconfig import RunConfig

if TYPE_CHECKING:
    from .graph import Graph


@dataclass(frozen=True)
class Program:
    """A built program that runs: its directory (the L2 or L3 root, or a multi-orch sub-build with its own
    golden.py), that directory's layout kind (L2 or L3) and the platform the build chose."""

    path: Path
    kind: BuildKind
    platform: str

    def config(self, config: Any = None) -> Any:
        """`config` (a RunConfig, a dict of its fields, None) for a run of this program: on its platform."""
        return replace(RunConfig.of(config), platform=self.platform)

    def encode(self, root: Path) -> tuple[str, str]:
        """(directory relative to `root`, kind name): what a `BuildResult` and the no-op record keep."""
        rel = Path(self.path).relative_to(root).as_posix()
        return rel, self.kind.name


@dataclass(frozen=True)
class Binaries:
    """The binaries a run loads: those built in `where` (kernels, orchestration, kernel_config.py). Today always
    the program's own directory (`Binaries.own`); golden.py, the sidecar and the kept outputs stay the
    program's whatever `where` is, so a caller may run binaries it names (a scratch copy) through the same entry."""

    where: Path

    @classmethod
    def own(cls, program: Program) -> Binaries:
        return cls(Path(program.path))


def decode(root: Path, platform: str, runs: Any) -> tuple[Program, ...]:
    """The programs `encode` kept (relative directory, kind name) under `root`, on `platform`; () when `runs`
    is not such a list (an older no-op record never answers: its FORMAT differs)."""
    found = []
    for rel, kind in runs or ():
        found.append(Program(Path(root) if rel == "." else Path(root) / rel, BuildKind[kind], platform))
    return tuple(found)


def programs(graph: Graph) -> tuple[Program, ...]:
    """The programs `graph` can run, one per run target (`graph.run_targets`, in its order)."""
    from .graph import run_targets

    return tuple(program(graph, t.rel) for t in run_targets(graph))


def program(graph: Graph, rel: str) -> Program:
    """The program of `graph`'s run target at `rel`: the L2 or L3 root, or a sub-build of a multi-orch parent
    that has a golden.py (an L2 program of its own)."""
    layout = graph.layout
    kind = BuildKind.L2 if layout.kind is BuildKind.MULTI_ORCH else layout.kind
    return Program(layout.root if rel == "." else layout.root / rel, kind, graph.platform.name)
