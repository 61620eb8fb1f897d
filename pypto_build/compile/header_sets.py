"""The states of the headers a unit read outside the build directory, stored once per distinct set.

The compiler's own headers (`<cstdint>`, glibc, `/usr/local/include`), `-isystem`
libraries, an external kernel's directory: tracked as exactly as the build
directory's own headers (the compiler's identity does not cover them: `libc6-dev`
changes them with the compiler untouched), but hundreds of units read the same dozens
of them. A state per header per unit made the state database 8x larger (2.2 -> 18 MB)
and the no-op through doit and the one-edit rebuild 2x slower (2.65 -> 5.1 s, 2.55 ->
5.3 s) on the 2,048-kernel synth directory; shared sets keep them as before. So a unit's
values name its set — a digest of the paths and contents — and the states live
once in `headers/<name>.json` of the platform's state folder
(`state_dir.state_folder`: `.pypto_build/state/<platform>/`), written (atomically)
by the first compile that reads that set; `SetChecker` checks each set once per
run. A missing or damaged record makes its units stale. A set's states are not
refreshed after a `touch` (explain must not write): such a header is hashed again
once per run until a compile rewrites the set. Every function takes that folder
(relative to the build root): a platform's full build prunes the sets its own units
no longer name, never another's.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from ..core import atomic
from ..core.filestate import digest_of, first_changed
from ..core.hashing import text_digest
SETS = "headers"       # in a platform's state folder (relative to the build root: every action's working directory)


def name_of(states: dict[str, list]) -> str:
    """The set's name: its paths and digests (a state without a digest names a set no check accepts)."""
    return text_digest(*(f"{path}\0{digest_of(state)}" for path, state in sorted(states.items())))


def sets_dir(folder: str) -> str:
    """The records' folder in the state folder `folder`."""
    return f"{folder}/{SETS}"


def record_path(name: str, folder: str, root: Path | str = ".") -> Path:
    return Path(root) / sets_dir(folder) / f"{name}.json"


def store(states: dict[str, list], folder: str) -> str:
    """Write the set unless an intact copy is there (another unit read the same); its name."""
    name = name_of(states)
    if read(name, folder) is None:
        atomic.write_text(record_path(name, folder), json.dumps({"headers": states}, sort_keys=True))
    return name


def read(name: str, folder: str, root: Path | str = ".") -> dict[str, list] | None:
    """The states of set `name`; None when its record is missing, damaged or not that set."""
    try:
        states = json.loads(record_path(name, folder, root).read_text(encoding="utf-8"))["headers"]
        if all(isinstance(s, list) and len(s) == 6 for s in states.values()) and name_of(states) == name:
            return states
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def files_of(names: set[str], folder: str) -> list[str] | None:
    """The records of sets `names` and the headers in them (for the no-op record); None if one is unreadable."""
    files: list[str] = []
    for name in sorted(names):
        states = read(name, folder)
        if states is None:
            return None
        files += [record_path(name, folder).as_posix(), *states]
    return files


class SetChecker:
    """Each set's verdict, once per run: "" when every header in it is unchanged, else why not.

    One instance per planned graph: the units of a run share the verdicts, so a
    system header is stat'ed once per run, not once per unit.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._verdicts: dict[str, str] = {}

    def stale(self, name: str) -> str:
        if name not in self._verdicts:
            self._verdicts[name] = _check(name, self.folder)
        return self._verdicts[name]


def _check(name: str, folder: str) -> str:
    states = read(name, folder)
    if states is None:
        return f"{record_path(name, folder)} (states of headers outside the build directory) missing or damaged"
    changed = first_changed(states)
    return f"header {changed}" if changed else ""


def named(values: Iterable[Any]) -> set[str]:
    """The sets a run's task values name (a unit's `outside`)."""
    return {v["outside"] for v in values if isinstance(v, dict) and v.get("outside")}


def prune(root: Path, keep: set[str], folder: str) -> None:
    """Remove the records (and a killed writer's temp files) in `folder` that no unit names any more."""
    try:
        entries = list(os.scandir(Path(root) / sets_dir(folder)))
    except OSError:
        return
    for entry in entries:
        if entry.name.removesuffix(".json") not in keep or not entry.name.endswith(".json"):
            try:
                os.unlink(entry.path)
            except OSError:
                pass
