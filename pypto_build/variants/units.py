"""A program's units as a variant records them: which binary each builds from which source (`UnitRef`, planned) and
their digests now (`UnitState`), and the variant's id, the digest of every binary the program runs (`variant_id`).

A unit is a compile task of the program (`compile:<sub/><core>/<stem>`, `orch:<sub/><stem>`); its binary is what
the runtime loads (the unit's output, or its last post-step's: `SubBuildPlan.outputs`). Paths are relative to the
program's directory (the build root, or a multi-orch sub-build's own folder), so a copied directory records the
same variant, and a sub-build validated on its own or through its parent the same one; a unit is known by its
binary's path (its task's name differs between the two).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from ..core.hashing import file_digest, text_digest

UNIT_FIELDS = ("task", "source", "source_digest", "binary", "binary_digest", "argv")


@dataclass(frozen=True)
class UnitRef:
    """One unit of a program as planned: its task, its source, the binary the runtime loads, its command's key."""

    task: str
    source: str
    binary: str
    argv: str           # the unit's argv digest (`CompileUnit.argv_key`): whether it is built the same way


@dataclass(frozen=True)
class UnitState:
    """A unit as a variant records it: its `UnitRef` with the digests of its source and binary (a source that is
    gone: None)."""

    task: str
    source: str
    source_digest: str | None
    binary: str
    binary_digest: str
    argv: str

    def as_dict(self) -> dict:
        return asdict(self)


def program_units(plans: Iterable, rel: str) -> tuple[UnitRef, ...]:
    """The units of the program at `rel` (".": the build root's, every sub-build; else the sub-build at `rel` of a
    multi-orch parent), from the graph's `SubBuildPlan`s, in plan order, their paths relative to `rel`."""
    found = []
    for plan in plans:
        if rel != "." and plan.sub.rel != rel:
            continue
        for unit, binary in zip(plan.units, plan.outputs):
            found.append(UnitRef(unit.task, _within(unit.source, rel), _within(binary, rel), unit.argv_key))
    return tuple(found)


def _within(path: str, rel: str) -> str:
    """`path` (relative to the build root) relative to the program folder `rel`; as it is when not inside it."""
    prefix = f"{rel}/"
    return path[len(prefix):] if rel != "." and path.startswith(prefix) else path


def unit_states(program_dir: Path, refs: Iterable[UnitRef]) -> list[UnitState] | None:
    """The digests of each unit's source and binary now; None when a binary is missing (nothing to record)."""
    states = []
    for ref in refs:
        try:
            binary = file_digest(os.path.join(program_dir, ref.binary))
        except OSError:
            return None
        try:
            source = file_digest(os.path.join(program_dir, ref.source))
        except OSError:
            source = None
        states.append(UnitState(ref.task, ref.source, source, ref.binary, binary, ref.argv))
    return states


def variant_id(states: Iterable[UnitState]) -> str:
    """The variant: the digest of every binary the program runs, by path and content, in plan order."""
    parts: list[str] = []
    for s in states:
        parts += [s.binary, s.binary_digest]
    return text_digest(*parts)
