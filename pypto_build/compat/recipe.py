"""The two steps PyPTO's benchmarking recipe takes before `CompiledProgram.from_dir` and `benchmark()`.

PyPTO's `from_dir` serves whatever binaries exist, so its recipe applies a `.pto` edit and drops the
cached binaries by hand first (`pypto.runtime.debug.rebuild_kernel_cpp_from_pto` and
`invalidate_binary_cache`). Ours builds what changed, by content, on every call anyway; these two are
here so that the recipe runs as written, with PyPTO's meaning in our terms:

* `rebuild_kernel_cpp_from_pto(work_dir)` runs the `.pto` stage only (the `ptoas:` and `splice:` tasks:
  an edited `.pto` through ptoas, its body spliced into the kernel `.cpp` files); nothing compiles.
* `invalidate_binary_cache(work_dir)` makes the next build of `work_dir` rebuild every binary, deleting
  nothing (`invalidation`: a mark any front end's next build honours).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from ..plan import invalidation
from ..core import stages
from ..builddir.layout import BuildKind, load_layout
from ..builddir.state_dir import STATE_DIR

__all__ = ["rebuild_kernel_cpp_from_pto", "invalidate_binary_cache"]


def rebuild_kernel_cpp_from_pto(work_dir, *, ptoas: str | None = None, allow_unapplied_pto: bool = False,
                                progress: TextIO | None | str = "stdout"):
    """Run the `.pto` stage of `work_dir` (every sub-build) and nothing else; return its BuildResult.

    `result.spliced` lists the kernel `.cpp` files that took a new body. The stage's rules are a build's: a
    `.pto` edit that cannot be applied (no ptoas) raises BuildError unless `allow_unapplied_pto`;
    `PYPTO_REBUILD_FROM_PTO=0` turns the stage off (then nothing runs, and the progress says so).
    """
    from ..api import build

    if progress == "stdout":
        progress = sys.stdout           # looked up per call (tests and callers may replace sys.stdout)
    return build(work_dir, tasks=[stages.SPLICE], ptoas=ptoas, allow_unapplied_pto=allow_unapplied_pto,
                 progress=progress)


def invalidate_binary_cache(work_dir) -> list[Path]:
    """Make the next build of `work_dir` rebuild every binary (all compile units, as `--recompile`); delete
    nothing. Returns the directories marked: `work_dir`, and each sub-build of a multi-orchestration parent
    (`CompiledProgram.from_dir(parent/next_levels/<name>)` builds those on their own).

    The mark is written atomically under each directory's lock and stays until a build has taken it into
    its state; every unit then stays forced until it has rebuilt successfully.
    """
    from ..engine import dir_lock

    layout = load_layout(Path(work_dir).resolve())      # not a build directory: one LayoutError
    marked = [layout.root]
    if layout.kind is BuildKind.MULTI_ORCH:
        marked += [sub.path for sub in layout.sub_builds]
    for root in marked:
        with dir_lock(root / STATE_DIR):
            invalidation.mark(root)
    return marked
