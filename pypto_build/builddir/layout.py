"""What kind of build directory this is, and which sub-builds it holds.

Reads only file names and `kernel_config.py` (by AST, never executed). The
kind follows PyPTO's marker rules (its replay and `from_dir`): `kernel_config.py`
at the root means single-chip (L2); otherwise `orchestration/host_orch.py`
means distributed (L3); a root with neither but `next_levels/*/kernel_config.py`
is a multi-orchestration parent. Every path a build would read or write is
confined to the build directory (symlinks resolved), except external kernels.
`find_root` finds the build directory a path is in (file names only: cheap).
"""
from __future__ import annotations

import ast
import enum
import os
from dataclasses import dataclass
from pathlib import Path

from ..core.confine import confine, forget_resolved_dirs
from ..errors import LayoutError
from .manifest import KernelConfig, KernelSpec, read_kernel_config
from .manifest_ast import parse_quietly
from .markers import (COMPILED_META, DISTRIBUTED_META, HOST_ORCH, KERNEL_CONFIG, NEXT_LEVELS, is_build_dir,
                      present_markers, next_level_names as _next_level_names)
from .state_checks import confine_state
from .state_dir import STATE_DIR
from ..core.safeio import read_bytes, unreachable


class BuildKind(enum.Enum):
    """The three shapes PyPTO writes, told apart by their marker files (`classify`)."""

    L2 = "single-chip (L2)"
    L3 = "distributed (L3)"
    MULTI_ORCH = "multi-orchestration parent"


@dataclass(frozen=True)
class SubBuild:
    """One directory with its own kernel_config.py (the root of an L2 build,
    or `next_levels/<name>/`, named after its orchestration function)."""

    name: str          # "." for the root, else the next_levels entry name
    rel: str           # posix path relative to the build root ("." or "next_levels/<name>")
    path: Path         # absolute
    config: KernelConfig

    def label(self, unit: str) -> str:
        """Task-name label of a unit inside this sub-build."""
        return unit if self.name == "." else f"{self.name}/{unit}"


@dataclass(frozen=True)
class Layout:
    """A build directory as read from disk: its kind, the marker files it has, and every sub-build with
    its parsed `kernel_config.py` (`load_layout`; bad input raises LayoutError naming the file)."""

    root: Path
    kind: BuildKind
    markers: tuple[str, ...]
    sub_builds: tuple[SubBuild, ...]
    unreferenced: tuple[str, ...] = ()     # next_levels/<name> the host driver never references (not built)

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR


def classify(root: Path) -> tuple[BuildKind, tuple[str, ...]]:
    """The build kind of `root` from its four marker files."""
    root = Path(root)
    if not root.is_dir():
        what = "not a directory" if root.exists() else unreachable(root)
        raise LayoutError(f"{root}: {what}; pass a build_output/<jit_dir>/ directory")
    markers = present_markers(root)
    l2 = {KERNEL_CONFIG, COMPILED_META} & set(markers)
    l3 = {DISTRIBUTED_META, HOST_ORCH} & set(markers)
    if l2 and l3:
        raise LayoutError(
            f"{root}: ambiguous build directory: single-chip markers ({', '.join(sorted(l2))}) beside "
            f"distributed markers ({', '.join(sorted(l3))}); remove the stale ones or recompile via ir.compile()")
    if KERNEL_CONFIG in markers:
        return BuildKind.L2, markers
    if HOST_ORCH in markers:
        return BuildKind.L3, markers
    if l2 or l3:
        missing = KERNEL_CONFIG if l2 else HOST_ORCH
        raise LayoutError(f"{root}: has {', '.join(sorted(l2 or l3))} but no {missing}; "
                          "the build directory is incomplete — recompile via ir.compile()")
    if _next_level_names(root):
        return BuildKind.MULTI_ORCH, markers
    inside = build_dirs_in(root)
    if len(inside) == 1:
        raise LayoutError(f"{root}: not a build directory itself, but {root / inside[0]} is one; pass that")
    if inside:
        shown = ", ".join(inside[:SHOWN]) + (f" and {len(inside) - SHOWN} more" if len(inside) > SHOWN else "")
        raise LayoutError(f"{root}: not a build directory itself, but holds {len(inside)} ({shown}); pass one of "
                          f"them, or build and validate them all with `pypto-build ci {root}/*/`")
    raise LayoutError(f"{root}: not a build_output directory (missing kernel_config.py and "
                      "orchestration/host_orch.py, and no next_levels/*/kernel_config.py); pass the directory "
                      "ir.compile() wrote (build_output/<jit_dir>/)")


SHOWN = 5       # build directories named when a parent of several is given


def build_dirs_in(parent: Path) -> list[str]:
    """The names of `parent`'s subdirectories that are build directories (a build_output/ of jit dirs), sorted."""
    try:
        entries = sorted(e.name for e in os.scandir(parent) if e.is_dir())
    except OSError:
        return []
    found = []
    for name in entries:
        try:
            if is_build_dir(parent / name):
                found.append(name)
        except (LayoutError, OSError):          # a marker that is no regular file: not one to suggest
            continue
    return found


def find_root(start: Path) -> Path:
    """The build directory `start` is in, found as git finds its top level.

    `start` itself when it is one; else the nearest parent that is one — and when that
    is a `next_levels/<name>/` sub-build, the L3 or multi-orch root around it. A
    directory inside no build directory is returned as it is (`classify` says why).
    """
    start = Path(os.path.abspath(start))
    if not start.is_dir() or is_build_dir(start):
        return start
    for parent in start.parents:
        if is_build_dir(parent):
            top = parent.parent.parent
            return top if parent.parent.name == NEXT_LEVELS and is_build_dir(top) else parent
    return start


def load_layout(root: Path, *, include_stale: bool = False) -> Layout:
    """Classify `root` and read every sub-build's kernel_config.py.

    In an L3 build, `next_levels/<name>/` that `orchestration/host_orch.py`
    never mentions are stale leftovers of an earlier compile (PyPTO compiles
    them anyway): they are listed in `unreferenced` and built only with `include_stale`.
    """
    root = Path(os.path.abspath(root))
    forget_resolved_dirs()
    kind, markers = classify(root)
    unreferenced: list[str] = []
    if kind is BuildKind.L2:
        names = ["."]
    else:
        names = _next_level_names(root)
        if not names:
            raise LayoutError(f"{root}: distributed build without any next_levels/<name>/kernel_config.py; "
                              "recompile via ir.compile()")
        if kind is BuildKind.L3 and not include_stale:
            mentioned = host_driver_words(root / HOST_ORCH)
            if mentioned is not None:
                unreferenced = [n for n in names if n not in mentioned]
                names = [n for n in names if n in mentioned]
    confine_state(root)
    subs = []
    for name in (*names, *unreferenced):       # a leftover that escapes is refused too: replay could load it
        rel = "." if name == "." else f"{NEXT_LEVELS}/{name}"
        path = root if name == "." else root / NEXT_LEVELS / name
        confine(root, path / KERNEL_CONFIG, f"sub-build {rel}")
        if name in names:
            subs.append(SubBuild(name, rel, path, read_kernel_config(path / KERNEL_CONFIG)))
    return Layout(root, kind, markers, tuple(subs), tuple(f"{NEXT_LEVELS}/{n}" for n in unreferenced))


def host_driver_words(path: Path) -> set[str] | None:
    """Every string constant, name and attribute in host_orch.py (read by AST, never run).

    None when it cannot be parsed: then every sub-build counts as referenced.
    """
    try:
        tree = parse_quietly(read_bytes(path), path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.add(node.value)
        elif isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
    return words


def kernel_source(sub: SubBuild, kernel: KernelSpec, root: Path) -> Path:
    """Absolute path of a kernel's source, confined unless the kernel is external."""
    path = resolve_in(sub, kernel.source, kernel.rooted)
    if kernel.external:
        return path
    confine(root, path, f"kernel {kernel.name or kernel.func_id} source (kernel_config.py line {kernel.line})")
    return path


def include_dirs(sub: SubBuild, kernel: KernelSpec, root: Path) -> list[Path]:
    """The kernel's extra include dirs, confined unless the kernel is external."""
    dirs = [resolve_in(sub, d, True) for d in kernel.extra_include_dirs]
    if not kernel.external:
        for d in dirs:
            confine(root, d, f"include dir of kernel {kernel.name or kernel.func_id} "
                             f"(kernel_config.py line {kernel.line})")
    return dirs


def resolve_in(sub: SubBuild, source: str, rooted: bool) -> Path:
    """A path from kernel_config.py made absolute against its sub-build."""
    p = Path(source)
    return p if p.is_absolute() and not rooted else sub.path / p
