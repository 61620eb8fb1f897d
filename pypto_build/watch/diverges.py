"""A watch round that FAILS right after a PASS: where the two runs part, traced against the last PASSED variant.

On a platform whose arguments dump carries payloads, the round's block names the first task whose outputs differ
(`culprits.bisect` with the trace, in a scratch copy: the directory is not touched; the current variant's run
with the dump, and the good one's unless its dump on these inputs is kept), then points at `pypto-build bisect`
for the whole report. A trace that cannot be made is one line; the round's verdict stands either way.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..errors import PyptoBuildError, one_line


def divergence_lines(root: Path, good: str, start: Callable | None) -> list[str]:
    """The lines the round's block adds: the first divergent task against the variant `good` (its id)."""
    from ..culprits import bisect, divergence_summary

    began = time.perf_counter()
    try:
        report = bisect(root, good=good, method="trace", start=start)[0]
    except (PyptoBuildError, OSError) as exc:
        return [f"   diverges not traced: {one_line(exc, 300)}"]
    took = f"{len(report.runs)} run(s), {time.perf_counter() - began:.2f} s"
    if report.first_divergence is not None:
        lines = [f"   diverges {divergence_summary(report.first_divergence)}"]
    elif report.parting is not None:
        lines = [f"   diverges the task sequences part at {report.parting.describe()}"]
    else:
        lines = ["   diverges no task's outputs differ within the tolerance"]
    return [*lines, f"   bisect   against {good[:10]} ({took}): `pypto-build bisect {root}` for the full report"]
