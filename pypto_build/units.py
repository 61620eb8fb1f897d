"""The compile units of a build directory: what to compile, where, with which argv.

Pure planning from a `Layout` and a `Platform`; nothing runs here. Paths are
posix strings relative to the build root (the engine's working directory), so
a copied or re-cloned directory keeps its state; argv paths are relative to
the sub-build, which is the compiler's working directory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import LayoutError
from .identity import BinaryContext, binary_context
from .layout import Layout, SubBuild, include_dirs, kernel_source, resolve_in, confine
from .stamp import STAMP
from .toolchain import Platform, argv_key, kernel_argv, orchestration_argv


@dataclass(frozen=True)
class CompileUnit:
    """One kernel or orchestration compile (picklable: it is a doit action argument)."""

    task: str              # doit task name, e.g. "compile:aiv/foo" or "orch:chip_a/chip_a"
    kind: str              # "kernel" | "orchestration"
    sub_rel: str           # sub-build dir relative to the build root
    source: str            # relative to the build root, or absolute for external kernels
    output: str            # relative to the build root
    argv: tuple[str, ...]  # canonical command (cwd = sub-build); its digest is an input
    stamp: str             # the sub-build's binary_context.json, relative to the build root
    argv_key: str          # digest of argv without the locations of identity-covered roots
    covered: tuple[str, ...]  # dirs whose headers an identity covers (not tracked per unit)
    timeout: float = 900.0


@dataclass(frozen=True)
class SubBuildPlan:
    sub: SubBuild
    context: BinaryContext
    units: tuple[CompileUnit, ...]

    @property
    def stamp_path(self) -> str:
        return _join(self.sub.rel, STAMP)


def plan(layout: Layout, platform: Platform) -> list[SubBuildPlan]:
    """Every compile unit of every sub-build of `layout`."""
    timeout = float(os.environ.get("PYPTO_COMPILER_TIMEOUT") or 900)
    plans = []
    for sub in layout.sub_builds:
        # The orchestration first: it is the longest compile, and doit dispatches in this order,
        # so with -j it overlaps the kernels instead of trailing them.
        units = [_orch_unit(layout, sub, platform, timeout)]
        units += [_kernel_unit(layout, sub, k, platform, timeout) for k in sub.config.kernels]
        _check_unique(sub, units)
        plans.append(SubBuildPlan(sub, binary_context(platform, sub.config.runtime_name), tuple(units)))
    return plans


def _kernel_unit(layout: Layout, sub: SubBuild, k, platform: Platform, timeout: float) -> CompileUnit:
    src = kernel_source(sub, k, layout.root)
    incs = [_arg_path(layout.root, sub.path, d) for d in include_dirs(sub, k, layout.root)]
    stem = src.stem
    if k.external:
        # External kernels have no sidecar next to their source (PyPTO §6.2); ours lives in the sub-build.
        out_rel = f"cache/external/{k.func_id}_{k.core_type}_{stem}{platform.binary_suffix}"
        src_arg = source = str(src)
    else:
        src_arg = _rel_to(sub.path, src)
        out_rel = os.path.splitext(src_arg)[0] + platform.binary_suffix
        source = _join(sub.rel, src_arg)
    argv = kernel_argv(platform, k.core_type, src_arg, out_rel, incs)
    unit_name = f"{k.core_type}/{stem}"
    return _unit(f"compile:{sub.label(unit_name)}", "kernel", sub, source, out_rel, argv, platform, timeout)


def _orch_unit(layout: Layout, sub: SubBuild, platform: Platform, timeout: float) -> CompileUnit:
    orch = sub.config.orchestration
    src = resolve_in(sub, orch.source, orch.rooted)
    confine(layout.root, src, f"orchestration source (kernel_config.py line {orch.line})")
    src_rel = _rel_to(sub.path, src)
    out_rel = _rel_to(sub.path, src.with_suffix(".so"))
    argv = orchestration_argv(platform, src_rel, out_rel)
    return _unit(f"orch:{sub.label(src.stem)}", "orchestration", sub, _join(sub.rel, src_rel), out_rel, argv,
                 platform, timeout)


def _unit(task: str, kind: str, sub: SubBuild, source: str, out_rel: str, argv: tuple[str, ...],
          platform: Platform, timeout: float) -> CompileUnit:
    covered = platform.covered_roots()
    return CompileUnit(task, kind, sub.rel, source, _join(sub.rel, out_rel), argv, _join(sub.rel, STAMP),
                       # The compiler itself is its own input (identity), so the key covers only its arguments.
                       argv_key(argv[len(platform.compiler.command):], covered), tuple(covered.values()), timeout)


def _check_unique(sub: SubBuild, units: list[CompileUnit]) -> None:
    seen: dict[str, str] = {}
    for u in units:
        for key in (u.task, u.output):
            if key in seen:
                raise LayoutError(f"{sub.path / 'kernel_config.py'}: two entries build {key} "
                                  f"({seen[key]} and {u.source}); give each kernel its own source file")
            seen[key] = u.source


def _rel_to(base: Path, path: Path) -> str:
    rel = os.path.relpath(path, base)
    return rel if os.sep == "/" else Path(rel).as_posix()


def _arg_path(root: Path, base: Path, path: Path) -> str:
    """Relative to `base` when inside the build root (relocatable), else absolute."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    inside = real == real_root or real.startswith(real_root + os.sep)
    return _rel_to(base, path) if inside else real


def _join(sub_rel: str, rel: str) -> str:
    return rel if sub_rel == "." else f"{sub_rel}/{rel}"
