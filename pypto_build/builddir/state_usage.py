"""What a build directory's `.pypto_build/` holds, by meaning: bytes and files per part (`measure`, `usage`).

The parts: golden.py's kept result (`golden/`), the last run's output tensors (`replay/`), the build
state (each platform's doit database and header records, its binaries, the lock, the no-op record,
digests.json, search_dirs.json, splice records, ...), the history (`history.json`, `variants/` and a damaged
one set aside), and anything else (backups of hand-edited kernel bodies, leftovers of an interrupted
write). Sizes are the files' own (`lstat`): a symbolic link counts as one file of its own size and is
never followed, nor is a `.pypto_build` that is itself a link. Reads names and sizes, plus
golden/golden.json for what the kept result holds; never imports torch. Used by `history` and
`cache stats` (cli/state_report.py words it).
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..core.limits import read_capped
from ..errors import TooLarge
from .markers import NEXT_LEVELS, next_level_names
from .state_dir import BACKUP, GOLDEN, HISTORY, REPLAY, STATE_DIR, VARIANT_UNITS

GOLDEN_PART, REPLAY_PART, BUILD_PART, HISTORY_PART, OTHER_PART = "golden", "replay", "build state", "history", "other"
PARTS = (GOLDEN_PART, REPLAY_PART, BUILD_PART, HISTORY_PART, OTHER_PART)
GOLDEN_INDEX = "golden.json"        # golden/'s index (run/golden_key.py INDEX)
INPUTS_KEPT = "inputs_kept"         # golden.json's flag: whether golden.pt holds the inputs (absent: not said)
TENSOR_SUFFIX = ".pt"               # replay/<output>.pt


@dataclass(frozen=True)
class Part:
    """One part of a `.pypto_build/`: what it means, its bytes and its files (symbolic links included)."""

    name: str
    bytes: int = 0
    files: int = 0


@dataclass(frozen=True)
class GoldenHolds:
    """What golden/golden.json says the kept result holds (None: the index does not say, or is unreadable)."""

    outputs: int | None = None          # expected outputs
    inputs_kept: bool | None = None     # whether golden.pt holds the inputs too


@dataclass(frozen=True)
class StateUsage:
    """One `.pypto_build/`: whose (`rel`: "." for the build root, else next_levels/<name>), whether it is a
    folder, its parts in `PARTS` order, the output tensors kept in replay/, what the golden holds."""

    rel: str
    path: Path
    present: bool
    parts: tuple[Part, ...]
    replay_tensors: int = 0
    golden: GoldenHolds = GoldenHolds()

    def part(self, name: str) -> Part:
        return next(p for p in self.parts if p.name == name)

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.parts)


def usage(root: Path) -> list[StateUsage]:
    """The build root's `.pypto_build/`, then that of each `next_levels/<name>/` sub-build that has one
    (`markers.next_level_names`: the sub-builds of a multi-orch or L3 directory; an L2 root has none)."""
    root = Path(root)
    found = [measure(root)]
    for name in next_level_names(root):
        rel = f"{NEXT_LEVELS}/{name}"
        if os.path.lexists(root / rel / STATE_DIR):
            found.append(measure(root / rel, rel))
    return found


def measure(directory: Path, rel: str = ".") -> StateUsage:
    """What `directory/.pypto_build/` holds, part by part (nothing when it is no folder: absent or a link)."""
    state = Path(directory) / STATE_DIR
    try:
        present = stat.S_ISDIR(os.lstat(state).st_mode)
    except OSError:
        present = False
    if not present:
        return StateUsage(rel, state, False, tuple(Part(n) for n in PARTS))
    sizes = {n: [0, 0] for n in PARTS}
    tensors = 0
    for name, st in _files(state):
        first = name.partition("/")[0]
        counted = sizes[part_of(first)]
        counted[0] += st.st_size
        counted[1] += 1
        if first == REPLAY and name.count("/") == 1 and name.endswith(TENSOR_SUFFIX) and stat.S_ISREG(st.st_mode):
            tensors += 1
    golden = _golden_holds(state / GOLDEN / GOLDEN_INDEX)
    return StateUsage(rel, state, True, tuple(Part(n, *sizes[n]) for n in PARTS), tensors, golden)


def part_of(name: str) -> str:
    """The part an entry at the top of `.pypto_build/` belongs to."""
    if name == GOLDEN:
        return GOLDEN_PART
    if name == REPLAY:
        return REPLAY_PART
    if name in (HISTORY, VARIANT_UNITS) or name.startswith(f"{HISTORY}."):    # and .damaged[.N] set aside
        return HISTORY_PART
    if name == BACKUP or name.startswith("."):                  # backups; leftovers of interrupted writes
        return OTHER_PART
    return BUILD_PART


def _files(state: Path) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to `state`, its own `lstat`) of every entry under `state` but folders, links not followed;
    an entry that vanishes or cannot be read (a build running meanwhile, a folder without permission) is
    left out."""
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(state / rel if rel else state) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                todo.append(name)
            else:
                yield name, st


def _golden_holds(index: Path) -> GoldenHolds:
    """What golden.json says (a link or anything but a regular file is not read)."""
    try:
        if not stat.S_ISREG(os.lstat(index).st_mode):
            return GoldenHolds()
        data = json.loads(read_capped(index))
    except (OSError, TooLarge, ValueError, RecursionError):
        return GoldenHolds()
    if not isinstance(data, dict):
        return GoldenHolds()
    outputs = data.get("outputs")
    kept = data.get(INPUTS_KEPT)
    return GoldenHolds(len(outputs) if isinstance(outputs, list) else None, kept if isinstance(kept, bool) else None)
