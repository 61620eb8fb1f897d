"""A good binary the kept variants' store evicted, built again from its kept source in the scratch copy.

The unit's source in the copy becomes the kept one, the copy is built (only that unit is out of date, and its
post-steps), the binary is kept aside as the good variant's, and the copy's source is the current one again. The
command is today's for that unit: the note says whether it is the one the variant recorded (`UnitState.argv`) and
whether the bytes are the recorded ones (a header or the compiler may have changed since).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..core import atomic
from ..core.hashing import file_digest
from ..errors import UserError
from ..variants.store import VariantStore
from ..variants.units import UnitState
from .scratch import Scratch


def rebuild_unit(work: Scratch, program_dir: Path, store: VariantStore, now: UnitState, was: UnitState,
                 cache_dir: str | None) -> str:
    """Rebuild `was` (the good variant's unit of the program at `program_dir` in `work`'s copy) there; the note for
    the report."""
    from .. import pipeline
    from ..options import Request

    kept = store.read(was.source_digest) if was.source_digest else None
    if kept is None:
        raise UserError(f"{was.task}: the good variant's binary and source are no longer kept (the store's size "
                        "limit, PYPTO_BUILD_VARIANTS_SIZE); use --good DIR2 with a build directory of it")
    source = program_dir / was.source
    if Path(was.source).is_absolute() or not source.is_file():
        raise UserError(f"{was.task}: the good binary was evicted and its source {was.source} is not inside the "
                        "directory, so it cannot be rebuilt in a copy; use --good DIR2")
    current = source.read_bytes()
    atomic.write_bytes(source, kept)
    try:
        pipeline.run(work.path, Request.given(cache_dir=cache_dir, quiet=True), progress=None, check=True)
        built = program_dir / was.binary
        digest = file_digest(str(built))
        work.binaries.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, work.kept(was.binary_digest))
    finally:
        atomic.write_bytes(source, current)
    how = "with its recorded command" if was.argv == now.argv else "with today's command (the recorded one differs)"
    same = ("the same bytes as recorded" if digest == was.binary_digest else
            "other bytes than recorded (a header or the compiler changed since)")
    return f"{was.task}: the good binary was rebuilt from its kept source {how}: {same}"
