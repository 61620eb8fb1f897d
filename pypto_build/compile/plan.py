"""The compile units of a build directory: what to compile, where, with which argv.

Pure planning from a `Layout` and a `Platform`; nothing runs here. Paths are
posix strings relative to the build root (the engine's working directory), so
a copied or re-cloned directory keeps its state; argv paths are relative to
the sub-build, which is the compiler's working directory (the platform's command passes
each through `procs.path_arg`: a file name is never an option).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..core import stages
from ..errors import LayoutError
from ..toolchain.identity import BinaryContext
from ..core.confine import OUTPUT_FIX, confine, real_path, resolves_inside
from ..builddir.layout import Layout, SubBuild, include_dirs, kernel_source, resolve_in
from ..builddir.manifest_ast import manifest_error
from ..builddir.markers import KERNEL_CONFIG
from ..core.safeio import kind_of, unreachable
from ..core.settings import COMPILER_TIMEOUT, seconds
from ..platforms import Command, Platform, UnitSource
from ..toolchain.compiler import argv_key, source_name_problem

KERNEL_ENTRY = "kernel_entry"       # what every platform's runtime calls in a kernel's library


@dataclass(frozen=True)
class CompileUnit:
    """One kernel or orchestration compile: everything `run_compile` and `UnitCheck` need, decided at
    planning (picklable: it is a doit action argument). Its identity is the argv digest, the
    compiler's identity, the binary context, the source and the headers its depfile lists."""

    task: str              # doit task name, e.g. "compile:aiv/foo" or "orch:chip_a/chip_a"
    kind: str              # "kernel" | "orchestration"
    sub_rel: str           # sub-build dir relative to the build root
    source: str            # relative to the build root, or absolute for external kernels
    output: str            # relative to the build root
    argv: tuple[str, ...]  # canonical command (cwd = sub-build); its digest is an input
    stamp_path: str        # the sub-build's binary_context.json, relative to the build root
    argv_key: str          # digest of argv without the locations of identity-covered roots
    covered: tuple[str, ...]  # dirs whose headers an identity covers (not tracked per unit)
    timeout: float = 900.0
    include_roots: tuple[str, ...] = ()  # resolved dirs outside the build dir a header may come from
    cwd: str = ""          # the compiler's working directory when not the sub-build (absolute: a toolchain's tree)
    entry: str = ""        # the symbol the platform runs, which a launcher-linked library must export


@dataclass(frozen=True)
class StepUnit:
    """A file-to-file step after a kernel's compile (`platforms.PostStep`: a device kernel's link, then its
    payload's extraction), with its own identity: the tool's and its argv's (`key`). Paths relative to the
    build root; `argv` runs in `cwd` (absolute paths), empty for a step done in process."""

    task: str
    kind: str
    sub_rel: str
    input: str
    output: str
    argv: tuple[str, ...]
    key: str
    stamp_path: str
    cwd: str = ""


@dataclass(frozen=True)
class SubBuildPlan:
    """The plan of one sub-build: its compile units (the orchestration first) and the binary context
    they are built under (what its stamp, cache/binary_context.json, records)."""

    sub: SubBuild
    context: BinaryContext
    units: tuple[CompileUnit, ...]
    stamp_path: str        # relative to the build root: where this platform's stamp goes
    steps: tuple[StepUnit, ...] = ()

    @property
    def outputs(self) -> list[str]:
        """What runs: each unit's output, or the last step's after it."""
        last = {s.input: s.output for s in self.steps}
        found = []
        for u in self.units:
            out = u.output
            while out in last:
                out = last[out]
            found.append(out)
        return found


def plan(layout: Layout, platform: Platform) -> list[SubBuildPlan]:
    """Every compile unit of every sub-build of `layout`."""
    timeout = seconds(*COMPILER_TIMEOUT)
    plans = []
    roots: dict[tuple[str, ...], tuple[str, ...]] = {}    # include roots, resolved once per distinct set
    for sub in layout.sub_builds:
        _check_runtime(sub, platform)
        stamp_path = _join(sub.rel, platform.facts.stamp_path)
        # The orchestration first: it is the longest compile, and doit dispatches in this order,
        # so with -j it overlaps the kernels instead of trailing them.
        units = [_orch_unit(layout, sub, platform, timeout, roots)]
        steps: list[StepUnit] = []
        for k in sub.config.kernels:
            unit, command = _kernel_unit(layout, sub, k, platform, timeout, roots)
            units.append(unit)
            steps += _steps(layout.root, sub, unit, command, platform, stamp_path)
        _check_unique(sub, [*units, *steps])
        outputs = [(u.output, f"output of {u.task}") for u in [*units, *steps]]
        for path, what in outputs + [(stamp_path, "stamp")]:
            confine(layout.root, layout.root / path, what, OUTPUT_FIX)
        plans.append(SubBuildPlan(sub, platform.binary_context(sub.config.runtime_name), tuple(units), stamp_path,
                                  tuple(steps)))
    return plans


def _kernel_unit(layout: Layout, sub: SubBuild, k, platform: Platform, timeout: float,
                 roots: dict[tuple[str, ...], tuple[str, ...]]) -> tuple[CompileUnit, Command]:
    src = kernel_source(sub, k, layout.root)
    _require_file(sub, src, f"kernel {k.name or k.func_id} source", k.line)
    incs = [_arg_path(layout.root, sub.path, d) for d in include_dirs(sub, k, layout.root)]
    stem = src.stem
    if k.external:
        # External kernels: nothing is written next to their source (PyPTO writes nothing there either); the
        # binary lives in the sub-build.
        src_arg = source = str(src)
    else:
        src_arg = _rel_to(sub.path, src)
        source = _join(sub.rel, src_arg)
    command = platform.command(UnitSource("kernel", src_arg, sub.path, sub.config.runtime_name, tuple(incs),
                                          k.func_id, k.core_type, k.external))
    unit_name = f"{k.core_type}/{stem}"
    # An external kernel may include headers from its own directory (PyPTO's explicit opt-in).
    return _unit(stages.task(stages.COMPILE, sub.label(unit_name)), "kernel", layout.root, sub, source, command,
                 platform, timeout, roots, (str(src.parent),) if k.external else (), KERNEL_ENTRY), command


def _steps(root: Path, sub: SubBuild, unit: CompileUnit, command: Command, platform: Platform,
           stamp_path: str) -> list[StepUnit]:
    """The platform's steps after a kernel's compile, named after the kernel's compile task."""
    if not command.steps:
        return []
    _, _, name = unit.task.partition(":")
    located = _key_roots(platform, root, command.cwd, sub)
    return [StepUnit(stages.task(step.kind, name), step.kind, sub.rel, _join(sub.rel, step.input),
                     _join(sub.rel, step.output), step.argv, argv_key((step.identity, *step.argv), located), stamp_path,
                     os.fspath(command.cwd))
            for step in command.steps]


def _key_roots(platform: Platform, root: Path, cwd: Path, sub: SubBuild) -> dict[str, str]:
    """The locations an argv digest leaves out: identity-covered trees, and the build root when the compiler
    runs outside the directory (`cwd`) and needs whole paths into it (a copied directory stays up to date)."""
    covered = platform.facts.covered_roots
    return covered if cwd == sub.path else {**covered, "<build-root>": os.fspath(root)}


def _orch_unit(layout: Layout, sub: SubBuild, platform: Platform, timeout: float,
               roots: dict[tuple[str, ...], tuple[str, ...]]) -> CompileUnit:
    orch = sub.config.orchestration
    src = resolve_in(sub, orch.source, orch.rooted)
    confine(layout.root, src, f"orchestration source (kernel_config.py line {orch.line})")
    _require_file(sub, src, "ORCHESTRATION source", orch.line)
    src_rel = _rel_to(sub.path, src)
    command = platform.command(UnitSource("orchestration", src_rel, sub.path, sub.config.runtime_name))
    return _unit(stages.task(stages.ORCH, sub.label(src.stem)), "orchestration", layout.root, sub,
                 _join(sub.rel, src_rel), command, platform, timeout, roots, entry=orch.function_name)


def _unit(task: str, kind: str, root: Path, sub: SubBuild, source: str, command: Command, platform: Platform,
          timeout: float, resolved: dict[tuple[str, ...], tuple[str, ...]], extra_roots: tuple[str, ...] = (),
          entry: str = "") -> CompileUnit:
    covered = platform.facts.covered_roots
    argv, cwd = command.argv, command.cwd
    roots = (*covered.values(), *_include_flag_paths(argv, cwd), *extra_roots)
    if roots not in resolved:           # the compiler's search directories come resolved
        resolved[roots] = tuple(dict.fromkeys([*(real_path(r) for r in roots), *platform.facts.system_dirs]))
    # The most specific covered root first: a checkout inside another (simpler's build/pto-isa) answers for its files.
    covered_dirs = tuple(sorted(covered.values(), key=len, reverse=True))
    # The compiler itself is its own input (identity), so the key covers only its arguments.
    words = len(platform.compiler_for(kind, sub.config.runtime_name).command)
    key = argv_key(argv[words:], _key_roots(platform, root, cwd, sub))
    return CompileUnit(task, kind, sub.rel, source, _join(sub.rel, command.output), argv,
                       _join(sub.rel, platform.facts.stamp_path), key, covered_dirs, timeout, resolved[roots],
                       "" if cwd == sub.path else os.fspath(cwd), entry)


INCLUDE_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros")


def include_flag_values(argv: Sequence[str], flags: Sequence[str] = INCLUDE_FLAGS) -> list[str]:
    """What an argv gives to `flags` (`-I dir` and `-Idir` alike), as written."""
    found = []
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith(flag) and arg != flag:
                found.append(arg[len(flag):])
    return found


def _include_flag_paths(argv: tuple[str, ...], cwd: Path) -> list[str]:
    """The directories (and forced-include files) an argv names with -I, -isystem, -include, ...

    The tool passes them itself (runtime headers, $PTO_ISA_ROOT, extra_include_dirs, $CXXFLAGS),
    so headers under them are not an escape.
    """
    return [os.path.join(cwd, p) for p in include_flag_values(argv)]


def _require_file(sub: SubBuild, src: Path, what: str, line: int) -> None:
    """A source named by kernel_config.py must be a file, under a name the compiler cannot take for
    options, before anything runs (one line naming the entry)."""
    shown = _rel_to(sub.path, src)
    shown = str(src) if shown.startswith("..") else shown
    bad_name = source_name_problem(src)
    if bad_name:
        raise manifest_error(sub.config.path, line, f"{what} {shown}: {bad_name}",
                             "a source file name that does not start with '@'",
                             "Rename the file and its entry in kernel_config.py")
    if not src.is_file():
        problem = f"is {kind_of(src.stat().st_mode)}, not a regular file" if src.exists() else unreachable(src)
        raise manifest_error(sub.config.path, line, f"{what} {shown} {problem}", "an existing source file",
                             "Restore the file, fix the entry, or recompile via ir.compile() to regenerate it")


def _check_runtime(sub: SubBuild, platform: Platform) -> None:
    """A runtime the platform cannot build is refused before anything compiles, naming RUNTIME_CONFIG."""
    name = sub.config.runtime_name
    if name not in platform.facts.runtimes:
        raise manifest_error(sub.config.path, sub.config.runtime_line,
                             f'RUNTIME_CONFIG["runtime"] is "{name}", which the {platform.name} platform cannot '
                             "build or run", " or ".join(f'"{r}"' for r in platform.facts.runtimes),
                             "Build it for a platform that has this runtime (PyPTO with simpler), or recompile "
                             "via ir.compile() with the runtime this platform has")


def _check_unique(sub: SubBuild, units: list[CompileUnit | StepUnit]) -> None:
    seen: dict[str, str] = {}
    for u in units:
        source = u.source if isinstance(u, CompileUnit) else u.input
        for key in (u.task, u.output):
            if key in seen:
                raise LayoutError(f"{sub.path / KERNEL_CONFIG}: two entries build {key} "
                                  f"({seen[key]} and {source}); give each kernel its own source file")
            seen[key] = source


def _rel_to(base: Path, path: Path) -> str:
    rel = os.path.relpath(path, base)
    return rel if os.sep == "/" else Path(rel).as_posix()


def _arg_path(root: Path, base: Path, path: Path) -> str:
    """Relative to `base` when inside the build root (relocatable), else absolute."""
    return _rel_to(base, path) if resolves_inside(os.fspath(path), os.fspath(root)) else os.path.realpath(path)


def _join(sub_rel: str, rel: str) -> str:
    return rel if sub_rel == "." else f"{sub_rel}/{rel}"
