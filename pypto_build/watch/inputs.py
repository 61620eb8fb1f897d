"""What a watched build directory depends on, and which of those files really changed.

`collect()` lists every file a round reads, each with its role: the graph's sources
and the headers their depfiles list (inside the directory and out), `.pto` units,
golden.py with its data and whatever it read last time, and the planning inputs
(kernel_config.py, the sidecars, the host driver, the compiler binary). `Snapshot`
keeps their states (`filestate`: content decides, stat only short-circuits), so an
editor's save burst, a `touch`, or our own writes (binaries, splices, the stamp,
state) never start a round: only a file whose *content* moved does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..compile import header_sets
from ..core.filestate import State, is_modified, make_state, same_stat
from ..core.safeio import is_regular
from ..plan.graph import Graph, run_targets
from ..builddir.markers import COMPILED_META, DFX_OUTPUTS, DISTRIBUTED_META, GOLDEN_PY, HOST_ORCH, KERNEL_CONFIG
from ..builddir.state_dir import STATE_DIR, current_state_folder

SOURCE, HEADER, PTO, GOLDEN, PLANNING = "source", "header", "pto", "golden", "planning"
# New files with these names (or under data/) may change the plan or the golden: they start a round.
PLANNED_NAMES = (KERNEL_CONFIG, GOLDEN_PY, COMPILED_META, DISTRIBUTED_META, os.path.basename(HOST_ORCH))
IGNORED_PARTS = (STATE_DIR, "__pycache__", DFX_OUTPUTS, ".git")


@dataclass
class Inputs:
    """The files a round read (absolute path -> role) and the directories to watch for them."""

    root: Path
    roles: dict[str, str] = field(default_factory=dict)

    def add(self, paths: Iterable[str], role: str) -> None:
        for path in paths:
            full = os.path.normpath(path if os.path.isabs(path) else os.path.join(self.root, path))
            self.roles.setdefault(full, role)

    def watch_paths(self, polling: bool = False) -> list[str]:
        """What to watch, one level deep: every folder of the build directory (but ours), and each input
        outside it — its folder (inotify: an editor's rename-over is seen), or itself when polling (a
        compiler in /usr/bin never makes us poll all of /usr/bin)."""
        paths = set()
        for here, subdirs, _files in os.walk(self.root):
            subdirs[:] = [d for d in subdirs if d not in IGNORED_PARTS and not os.path.islink(os.path.join(here, d))]
            paths.add(here)
        outside = [p for p in self.roles if os.path.relpath(p, self.root).startswith(os.pardir)]
        if polling:
            paths |= {p for p in outside if os.path.exists(p)}
        else:
            paths |= {d for d in map(os.path.dirname, outside) if os.path.isdir(d)}
        return sorted(paths)

    def starts_round(self, path: str) -> bool:
        """An unknown file that appeared or went: does it matter (a planning input, a .pto unit, golden data)?"""
        rel = os.path.relpath(path, self.root)
        if rel.startswith(os.pardir) or ignored(self.root, path):
            return False
        parts = Path(rel).parts
        return parts[-1] in PLANNED_NAMES or parts[-1].endswith(".pto") or "data" in parts[:-1]


def ignored(root: Path, path: str) -> bool:
    """Paths under our state, diagnostics, caches and VCS folders: never inputs."""
    rel = os.path.relpath(path, root)
    return not rel.startswith(os.pardir) and any(part in IGNORED_PARTS for part in Path(rel).parts)


def collect(graph: Graph, values: dict[str, dict], golden_reads: Iterable[str] = ()) -> Inputs:
    """Every input of `graph` as its last run saw it (`values`: each task's recorded values)."""
    root = graph.layout.root
    folder = current_state_folder(root, graph.platform.name)
    inputs = Inputs(root)
    inputs.add(graph.layout.markers, PLANNING)
    for plan in graph.plans:
        sub = plan.sub.rel
        inputs.add([os.path.join(sub, KERNEL_CONFIG)], PLANNING)
        if (plan.sub.path / HOST_ORCH).is_file():
            inputs.add([os.path.join(sub, HOST_ORCH)], PLANNING)
        for unit in plan.units:
            inputs.add([unit.source], SOURCE)
            recorded = values.get(unit.task) or {}
            inputs.add(recorded.get("headers") or {}, HEADER)
            if recorded.get("outside"):
                inputs.add(header_sets.read(recorded["outside"], folder, root) or {}, HEADER)
    inputs.add([u.pto for u in graph.pto.units], PTO)
    compiler = getattr(graph.platform, "compiler", None)
    if compiler is not None:
        inputs.add([compiler.path], PLANNING)
    covered = {c for plan in graph.plans for unit in plan.units for c in unit.covered}
    inputs.add(identity_files(covered), PLANNING)
    for target in run_targets(graph):
        base = target.rel
        inputs.add([p for p in target.inputs if p.endswith(GOLDEN_PY) or "/data/" in f"/{p}"], GOLDEN)
        inputs.add([os.path.join(base, GOLDEN_PY)], GOLDEN)
    inputs.add(golden_reads, GOLDEN)
    return inputs


def identity_files(covered: Iterable[str]) -> list[str]:
    """The git HEAD and index of each checkout whose revision covers headers (PTO-ISA): a checkout,
    commit or staged edit there changes the identity, so the graph is planned again."""
    found = []
    for top in {_git_top(Path(c)) for c in covered} - {None}:
        found += [str(top / ".git" / name) for name in ("HEAD", "index") if (top / ".git" / name).is_file()]
    return sorted(found)


def _git_top(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if (candidate / ".git").is_dir():
            return candidate
    return None


class Snapshot:
    """The state of each input as a round read it: `changed()` names those whose content moved since."""

    def __init__(self) -> None:
        self.states: dict[str, State | None] = {}

    def take(self, paths: Iterable[str], *, keep: bool = False) -> None:
        """Record `paths` as they are now (`keep`: leave paths already recorded as they were)."""
        for path in paths:
            if not (keep and path in self.states):
                self.states[path] = _state(path)

    def changed(self, paths: Iterable[str]) -> list[tuple[str, str]]:
        """(path, "modified" | "added" | "removed") for each of `paths` whose content moved since it was recorded."""
        found = []
        for path in sorted(set(paths)):
            if path not in self.states:
                continue
            before = self.states[path]
            try:
                st = os.stat(path)
            except OSError:
                if before is not None:
                    found.append((path, "removed"))
                continue
            if before is None:
                found.append((path, "added"))
            elif is_modified(path, st, before) and (is_regular(st) or not same_stat(st, before)):
                found.append((path, "modified"))     # a FIFO or device (never read): moved when its stat did
        return found


def _state(path: str) -> State | None:
    try:
        return make_state(path)
    except OSError:
        return None
