"""What a build directory's state holds, in words: the `state` lines `history` and `cache stats` print.

One line per `.pypto_build/` (the build root's, then each sub-build's that has one), its parts as
builddir/state_usage.py measures them, e.g.
`state    golden 65.5 MiB (1 expected output) · replay 65.5 MiB (1 output) · build state 200.1 KiB · history 3.0 KiB`.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..builddir.layout import classify, find_root
from ..builddir.markers import is_build_dir
from ..builddir.state_dir import STATE_DIR
from ..builddir.state_usage import (BUILD_PART, GOLDEN_PART, HISTORY_PART, OTHER_PART, REPLAY_PART, StateUsage,
                                    usage)
from ..cache import human_size
from ..errors import LayoutError

SEPARATOR = " · "


def state_lines(root: Path) -> list[str]:
    """The `state` lines of the build directory `root`."""
    return [state_line(u) for u in usage(root)]


def state_line(u: StateUsage) -> str:
    """One `.pypto_build/` in one line: each part's size, what the golden and the replay folder hold."""
    label = "state" if u.rel == "." else f"state {u.rel}"
    if not u.present:
        why = "is not a folder; not read" if os.path.lexists(u.path) else "is not there"
        return f"{label}    nothing kept ({STATE_DIR}/ {why})"
    golden, replay, other = u.part(GOLDEN_PART), u.part(REPLAY_PART), u.part(OTHER_PART)
    words = [f"golden {human_size(golden.bytes)}{_golden_holds(u)}" if golden.files else "golden none",
             f"replay {human_size(replay.bytes)} ({_count(u.replay_tensors, 'output')})" if replay.files
             else "replay none",
             f"build state {human_size(u.part(BUILD_PART).bytes)}",
             f"history {human_size(u.part(HISTORY_PART).bytes)}" if u.part(HISTORY_PART).files else "history none"]
    if other.files:
        words.append(f"other {human_size(other.bytes)} ({_count(other.files, 'file')})")
    return f"{label}    {SEPARATOR.join(words)}"


def _golden_holds(u: StateUsage) -> str:
    """` (2 expected outputs)`, `... + inputs)`, `...; inputs not stored)`; empty when golden.json says nothing."""
    outputs, kept = u.golden.outputs, u.golden.inputs_kept
    said = _count(outputs, "expected output") if outputs is not None else ""
    if kept is True:
        said = f"{said} + inputs" if said else "inputs"
    elif kept is False:
        said = f"{said}; inputs not stored" if said else "inputs not stored"
    return f" ({said})" if said else ""


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def state_root(directory: Path | None) -> Path | None:
    """The build directory whose state `cache stats` shows: DIR's (not a build directory: LayoutError, one
    line), else the one the working directory is in, else None (then only the caches are shown)."""
    if directory is not None:
        return build_root(directory)
    try:
        root = find_root(Path.cwd())
        return root if is_build_dir(root) else None
    except (LayoutError, OSError):      # the working directory is gone, or an odd marker: not one to report
        return None


def build_root(directory: Path | str) -> Path:
    """The build directory `directory` is in, for the verbs that plan nothing (`history`, `cache stats DIR`):
    not there, or not a build directory, is one line (LayoutError), as every verb says it."""
    root = find_root(Path(directory))
    classify(root)
    return root
