"""Planning's front door: `load_graph()` reads a build directory and returns its `Graph`.

Pure planning: nothing is built, nothing is written, doit is not imported (a test
checks it). The only programs it runs are probes, through `procs.run`: each compiler's
`--version`, and `-x c++ -E -v`, `-print-search-dirs` and `-print-prog-name=` only when
`search_dirs.json` does not still hold the answer; git (`rev-parse`, `status`, `ls-files`)
for the identities of covered checkouts. The graph says what there is to do — every compile unit per
sub-build, the `.pto` units, what replay/validate can run; each stage turns it into its doit task
dicts (`Stage.tasks`: `pto/stage.py`, `compile/stage.py`, `run/tasks.py`), with the caches and run settings
of one run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..core import hashing, settings
from ..toolchain import search_dirs
from ..core import stages
from ..toolchain.launcher import Launcher, local_jobs, resolve as resolve_launcher, split
from ..builddir.layout import BuildKind, Layout, load_layout
from ..builddir.markers import DISTRIBUTED_META, GOLDEN_PY, HOST_ORCH, KERNEL_CONFIG
from ..builddir.state_dir import STATE_DIR
from ..pto import PtoOptions, PtoPlan, plan_pto, pto_options
from ..platforms import Choice, Platform, cannot_serve, choose, implementation, platform_names
from ..compile.plan import SubBuildPlan, plan
from ..compile.prelude import Preludes, plan_preludes


@dataclass(frozen=True)
class Graph:
    """Everything one build directory asks for, as planned from its files (nothing here runs).

    `plans`: per sub-build, its compile units and binary context; `pto`: the `.pto` units and
    whether ptoas can apply them; `planned_ns`: `time.time_ns()` before planning read anything
    (the no-op record keeps only files unchanged since).
    """

    layout: Layout
    platform: Platform
    plans: tuple[SubBuildPlan, ...]
    pto: PtoPlan
    planned_ns: int = 0
    choice: Choice | None = None     # which platform and why (None: a located Platform was given)
    launcher: Launcher | None = None  # distcc & co.: how compiles run, not what they are (`launcher`)
    preludes: Preludes = Preludes()   # precompiled preludes and the kernels beginning with them (never an identity)

    def notices(self) -> tuple[list[str], list[str]]:
        """What planning has to tell before a run: (lines for stdout, lines for stderr). Printed by the
        engine's loader, kept in `BuildResult.warnings` by the API: one wording for every front end."""
        out = [self.banner()] + ([self.pto.skipped_line] if self.pto.skipped_line else [])
        if self.launcher is not None:
            units = [u for p in self.plans for u in p.units]
            sent = sum(1 for u in units if split(u.argv) is not None)
            whole = "" if sent == len(units) else (f"; {len(units) - sent} more (debug info, several sources or "
                                                     "already compile-only) compile here whole")
            out.append(f"pypto-build: {sent} of {len(units)} compiles go through {self.launcher.name}{whole}; links "
                       f"and the rest of the local work stay here, at most {local_jobs()} at a time")
        err = unreferenced_lines(self) + [f"pypto-build: {why}: binaries are not trusted, every unit rebuilds "
                                          "and no binary_context.json is written" for why in self.unknown_identities()]
        return out, err

    def banner(self) -> str:
        """The run's first line: the platform (and why, when not the recorded one), the runtime and PTO-ISA."""
        choice = self.choice or Choice(self.platform.name, "given")
        runtimes = ", ".join(dict.fromkeys(p.context.runtime_name for p in self.plans))
        runtime = pto_isa = "unknown"
        if self.plans:
            context = self.plans[0].context
            runtime, pto_isa = _short(context.runtime_revision.value), _short(context.pto_isa_revision.value)
        return (f"pypto-build: platform {self.platform.name} ({choice.why()}) · runtime: "
                f"{_label(self.platform.facts.runtime_label, runtime)}, {runtimes} · PTO-ISA: "
                f"{_label(self.platform.facts.pto_isa_label, pto_isa)}")

    def unknown_identities(self) -> list[str]:
        """One line per distinct reason an identity is unknown."""
        seen: list[str] = []
        for p in self.plans:
            why = p.context.unknown
            if why and why not in seen:
                seen.append(why)
        return seen

    @property
    def compile_tasks(self) -> list[str]:
        return [u.task for p in self.plans for u in p.units]


def load_graph(root: Path, platform: str | Choice | Platform | None = None, pto: PtoOptions | None = None,
               include_stale: bool = False, launcher: str | tuple[str, ...] | None = None,
               preludes: bool = True) -> Graph:
    """Read the build directory at `root` and plan it for `platform` (default: `platforms.choose` — the
    recorded one unless $PYPTO_BUILD_PLATFORM says otherwise; a recorded simulator simpler cannot
    serve here falls back to host).

    `platform` is a name (its toolchain is located), a `Choice` already made (`pipeline.run`: the
    platform is chosen once) or a `Platform` already located (tests plan with a fake compiler this
    way). Bad input raises a `UserError` naming the file; `include_stale` also plans the L3
    `next_levels/` sub-builds the host driver never references; `launcher` (a command as
    `launcher.find` found it, else $PYPTO_BUILD_LAUNCHER, else the one $CXX starts with) runs the
    compiles; `preludes`: plan precompiled preludes (where the platform offers them: `compile/prelude.py`).
    """
    started = time.time_ns()
    settings.check_planning(platform_names(), preludes=preludes)   # a bad value: one line, before anything is read
    layout = load_layout(root, include_stale=include_stale)
    choice = (None if isinstance(platform, Platform) else platform if isinstance(platform, Choice)
              else choose(root, platform, cannot_serve=cannot_serve))
    search_dirs.load(layout.root)       # the compiler's answers and the digests of the toolchain's files ...
    hashing.recall(layout.root / STATE_DIR)         # ... kept by an earlier build (read only)
    target = platform if isinstance(platform, Platform) else implementation(choice.name).locate()
    runs_with = resolve_launcher(launcher, from_cxx=target.compiler_for("kernel").launcher)
    plans = tuple(plan(layout, target))
    shared = plan_preludes(layout.root, plans, target) if preludes else Preludes()
    return Graph(layout, target, plans, plan_pto(layout, pto or pto_options()), started, choice, runs_with, shared)


def _short(revision: str | None) -> str:
    """A revision as people read it: a git hash's first 7 characters; "" for none; unknown."""
    if not revision:
        return "(identity unknown)"
    if revision == "none":
        return ""
    return revision[:7] if len(revision) == 40 and all(c in "0123456789abcdef" for c in revision) else revision


def _label(what: str, revision: str) -> str:
    return f"{what} {revision}" if revision else what


def unreferenced_lines(graph: Graph) -> list[str]:
    """One line per L3 sub-build left out because the host driver never references it."""
    return [f"pypto-build: {rel}: never referenced by orchestration/host_orch.py — a leftover of an earlier "
            "compile; not built (--include-stale builds it)" for rel in graph.layout.unreferenced]


@dataclass(frozen=True)
class RunTarget:
    """Something replay/validate can run: the L2 root, the L3 root, or a sub-build with a golden.py."""

    name: str               # task-name label
    rel: str                # directory relative to the build root
    stamps: tuple[str, ...]  # stamp tasks that must be done first
    inputs: tuple[str, ...]  # files a validation verdict depends on


def run_targets(graph: Graph) -> list[RunTarget]:
    layout = graph.layout
    if layout.kind is BuildKind.MULTI_ORCH:
        chosen = [p for p in graph.plans if (p.sub.path / GOLDEN_PY).is_file()]
        return [_target(p.sub.name, p.sub.rel, [p], layout.root) for p in chosen]
    extra = [HOST_ORCH, DISTRIBUTED_META] if layout.kind is BuildKind.L3 else []
    return [_target(".", ".", list(graph.plans), layout.root, extra)]


def _target(name: str, rel: str, plans: list[SubBuildPlan], root, extra: list[str] = ()) -> RunTarget:
    base = root if rel == "." else root / rel
    inputs = [out for p in plans for out in p.outputs]
    inputs += [_join(p.sub.rel, KERNEL_CONFIG) for p in plans] + [_join(rel, e) for e in extra]
    if (base / GOLDEN_PY).is_file():
        inputs.append(_join(rel, GOLDEN_PY))
    if (base / "data").is_dir():
        # Everything but directories: a FIFO or device there is an input too (stale, refused by the run).
        inputs += sorted(_join(rel, f.relative_to(base).as_posix()) for f in (base / "data").rglob("*")
                         if f.exists() and not f.is_dir())
    return RunTarget(name, rel, tuple(stages.task(stages.STAMP, p.sub.name) for p in plans), tuple(inputs))


def _join(rel: str, name: str) -> str:
    return name if rel == "." else f"{rel}/{name}"
