"""The two variants a bisect compares (`Side`): the directory's current one and the good one, with their units.

Good is, by default, the newest PASSED variant in the program's history; `--good VARIANT` an id `history` prints;
`--good DIR2` another build directory of the same program (same kernels, func_ids, core types and signatures, and
the same orchestration signature: the first difference is one line, exit 2), its binaries as they are built there.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..builddir.state_dir import HISTORY, STATE_DIR
from ..errors import UserError
from ..variants.history import History, Variant
from ..variants.units import UnitState, program_units, unit_states, variant_id


@dataclass(frozen=True)
class Side:
    """A variant of the program: what to call it, its units, its id, and the directory whose files are its
    binaries (the scratch copy for the current one, DIR2; None: the kept variants' store)."""

    label: str
    units: tuple[UnitState, ...]
    variant: str
    where: Path | None = None           # the program's folder there
    recorded: Variant | None = None     # its record in the history (the verdict, on which golden result, config)

    def unit(self, binary: str) -> UnitState:
        """Its unit that builds `binary` (relative to the program's folder: the same in both variants)."""
        return next(u for u in self.units if u.binary == binary)

    def named(self, task: str) -> UnitState:
        """Its unit of task `task` (this variant's own name for it)."""
        return next(u for u in self.units if u.task == task)

    def pair(self, good: Side, task: str) -> tuple[UnitState, UnitState]:
        """(good's unit, this variant's unit) of this variant's task `task`."""
        now = self.named(task)
        return good.unit(now.binary), now


def current(program_dir: Path, plans, rel: str) -> Side:
    """The variant built in the scratch copy (`program_dir`: the program's folder there): the sources as they are."""
    states = unit_states(program_dir, program_units(plans, rel))
    if states is None:
        raise UserError(f"{program_dir}: a binary is missing after the build; run `pypto-build build` on the "
                        "directory and look at what it says")
    return Side("current", tuple(states), variant_id(states), program_dir)


def from_history(program_dir: Path, want: str | None) -> Side:
    """The good variant from `program_dir`'s history: `want` (an id or its first characters), else the newest PASSED."""
    history = History(program_dir)
    path = program_dir / STATE_DIR / HISTORY
    if want is None:
        found = history.newest("PASSED")
        if found is None:
            raise UserError(f"{path}: no PASSED variant recorded; name the good one with --good VARIANT (an id "
                            "`pypto-build history` prints) or --good DIR2 (a build directory of the same program)")
    else:
        found = history.find(want)
        if found is None:
            raise UserError(f"{path}: no single variant {want!r} recorded; give an id `pypto-build history "
                            f"{program_dir}` prints (or enough of it to name one), or --good DIR2")
    units = history.units(found)
    if not units:
        raise UserError(f"{path}: variant {found.short} has no units recorded; validate it again (check out its "
                        "sources, `pypto-build validate`) or use --good DIR2")
    return Side(f"variant {found.short} ({found.verdict})", tuple(units), found.digest, recorded=found)


def from_directory(other: Path, plans, rel: str) -> Side:
    """The good variant as built in the directory `other` (its plan's units, its binaries)."""
    program_dir = other if rel == "." else other / rel
    states = unit_states(program_dir, program_units(plans, rel))
    if states is None:
        missing = next(u.binary for u in program_units(plans, rel) if not (program_dir / u.binary).is_file())
        raise UserError(f"{program_dir / missing}: not built; build the good directory first (`pypto-build build "
                        f"{other}`) and run bisect again")
    return Side(f"directory {other}", tuple(states), variant_id(states), program_dir)


def same_program(current_plans, good_plans, good_root: Path) -> None:
    """Refuse (one line, exit 2) a good directory that is not the same program: its first difference."""
    def shape(plans) -> list[tuple]:
        found = []
        for plan in plans:
            config = plan.sub.config
            found.append((plan.sub.rel, "orchestration", config.orchestration.function_name,
                          config.orchestration.signature))
            found += [(plan.sub.rel, k.name, k.func_id, k.core_type, k.signature) for k in config.kernels]
        return found

    mine, theirs = shape(current_plans), shape(good_plans)
    for a, b in zip(mine, theirs):
        if a != b:
            raise UserError(f"{good_root}: not the same program: {_said(b)} where this directory has {_said(a)}; "
                            "give a build directory of the same program (same kernels and signatures) to --good")
    if len(mine) != len(theirs):
        more, which = (mine, "this directory") if len(mine) > len(theirs) else (theirs, str(good_root))
        first = more[min(len(mine), len(theirs))]
        raise UserError(f"{good_root}: not the same program: only {which} has {_said(first)}; give a build "
                        "directory of the same program to --good")


def same_units(current_side: Side, good: Side) -> None:
    """Refuse a good variant whose units are not the current one's (a kernel added or removed since)."""
    mine, theirs = {u.binary for u in current_side.units}, {u.binary for u in good.units}
    if mine != theirs:
        only = sorted(mine ^ theirs)
        raise UserError(f"{good.label}: its units differ from the current ones (first: {only[0]}); pick a variant of "
                        "the same kernels with --good, or --good DIR2")


def _said(entry: tuple) -> str:
    rel, name, *rest = entry
    where = f" in {rel}" if rel != "." else ""
    if name == "orchestration":
        return f"orchestration {rest[0]} signature {list(rest[1])}{where}"
    func_id, core, signature = rest
    return f"kernel {name} (func_id {func_id}, {core}, signature {list(signature)}){where}"
