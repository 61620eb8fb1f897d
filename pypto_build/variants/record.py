"""What a run that reached a verdict records: its variant in the program's history, its binaries and sources kept.

Called by the one route that makes a verdict, the `validate:` task (`run.actions.run_validate`), whoever asked
for it (`validate`, `replay --validate`, `ci`, the API, each `watch` round), passing or failing. A program that
crashed records its variant too (`CRASHED`); a refused input records nothing (there was no verdict). Recording is
bookkeeping: a history or store that cannot be written is said in one warning and never changes the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:                   # every planned build makes a Recorder: what records is imported when one does
    from .units import UnitRef


@dataclass(frozen=True)
class Recorder:
    """What a `validate:` task records its verdict with (plain data: a doit action's argument): the program's
    units and the store (None: the store is off, `$PYPTO_BUILD_VARIANTS_SIZE=0`)."""

    units: tuple[UnitRef, ...]
    store: str | None

    def verdict(self, program_dir: Path, verdict: str, figures: str, platform: str, golden: str | None = None,
                config: str = "") -> str | None:
        return record_verdict(program_dir, self.units, self.store, verdict, figures, platform, golden, config)


def recorder(plans, rel: str, cache_dir: str | None) -> Recorder:
    """The `Recorder` of the program at `rel` of a graph's `plans` (`program_units`), its store beside `cache_dir`."""
    from ..core.settings import variants_size
    from .store import store_dir
    from .units import program_units

    store = store_dir(cache_dir) if variants_size() > 0 else None
    return Recorder(program_units(plans, rel), store)


def record_verdict(program_dir: Path, refs: Sequence[UnitRef], store_dir: str | None, verdict: str,
                   figures: str, platform: str, golden: str | None = None, config: str = "") -> str | None:
    """Record the variant of the program at `program_dir` (its units `refs`, relative to it) with
    `verdict` and `figures`; keep its binaries and sources in the store at `store_dir` (None: keep none).
    Returns the variant's id, or None when nothing was recorded (a binary missing, the history unwritable)."""
    from ..errors import one_line, warn
    from .history import Damaged, History
    from .store import VariantStore
    from .units import unit_states, variant_id

    states = unit_states(Path(program_dir), refs)
    if states is None:
        return None
    digest = variant_id(states)
    try:
        if store_dir is not None:
            files = [(s.binary_digest, Path(program_dir) / s.binary) for s in states]
            files += [(s.source_digest, Path(program_dir) / s.source) for s in states if s.source_digest]
            VariantStore(store_dir).add(files)
        history, aside = History.set_aside(Path(program_dir))
        if aside:
            warn(aside)
        history.record(digest, verdict, [], [], figures=figures, units=[s.as_dict() for s in states],
                       platform=platform, golden=golden or "", config=config)
        history.save()
    except (OSError, Damaged) as exc:
        warn(f"the variant {digest[:10]} was not recorded ({one_line(exc)}); the verdict stands")
        return None
    return digest
