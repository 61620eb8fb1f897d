"""Is this path inside the build directory: the one home of the confinement rules.

A build directory is data: what it names (sources, include dirs, outputs,
state) must stay inside it unless a kernel is marked external; what we write
must not leave it through a symbolic link. `confine` resolves and refuses in
one line naming the file and the fix; `inside` / `resolves_inside` answer
without refusing; `real_path` memoises directory resolution for one planning
pass.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import LayoutError


SOURCE_FIX = ("build directories must be self-contained — copy it into the directory, or mark an external "
              "kernel with \"external\": True in kernel_config.py")
OUTPUT_FIX = "replace the symbolic link with a real file or directory: pypto_build writes only inside the build directory"


def confine(root: Path, path: Path, what: str, fix: str = SOURCE_FIX) -> Path:
    """`path` with symlinks resolved; LayoutError when it leaves `root`."""
    real = real_path(os.fspath(path))
    if not inside(real, real_path(os.fspath(root))):
        raise LayoutError(f"{path}: {what} resolves outside the build directory {root} (to {real}); {fix}")
    return Path(real)


def inside(real: str, real_root: str) -> bool:
    """Whether the path `real` is `real_root` or below it, by name: resolve both first (`real_path`) to
    ask where a file really is, or pass absolute paths as given to ask where it was named."""
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def resolves_inside(path: str, root: str) -> bool:
    """Whether `path`, symbolic links resolved, is inside `root` (resolved)."""
    return inside(os.path.realpath(path), os.path.realpath(root))


def confine_tree(root: Path, top: Path, what: str) -> None:
    """Refuse a file or folder pypto_build writes into (`.pypto_build`, `dfx_outputs`, ...) when it,
    or any symbolic link below it, resolves outside `root`. Links are not followed into."""
    forget_resolved_dirs()              # a write site: resolve afresh
    confine(root, top, what, OUTPUT_FIX)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in (*dirnames, *filenames):
            entry = os.path.join(dirpath, name)
            if os.path.islink(entry):
                confine(root, Path(entry), f"entry of the {what}", OUTPUT_FIX)


_real_dirs: dict[str, str] = {}


def real_path(path: str) -> str:
    """os.path.realpath with the parent directory's resolution memoised for one planning pass.

    Thousands of kernels share a few directories; only the file itself is
    lstat'ed. Paths with `..` or a symlinked file take the full resolution.
    """
    parent, name = os.path.split(os.path.abspath(path))
    if name in ("", ".", "..") or ".." in path.split(os.sep):
        return os.path.realpath(path)
    real_parent = _real_dirs.get(parent)
    if real_parent is None:
        real_parent = _real_dirs[parent] = os.path.realpath(parent)
    full = os.path.join(real_parent, name)
    return os.path.realpath(full) if os.path.islink(full) else full


def forget_resolved_dirs() -> None:
    """Start a planning pass: symlinks may have changed since the last one."""
    _real_dirs.clear()
