"""The `.pto` stage as the engine assembles it: `ptoas:` and `splice:` per `.pto` unit, PyPTO's closing lines.

Its code (actions, checks) is loaded only for directories that have a `.pto` unit. Its tasks print
PyPTO's own lines when done (no progress line when they start); a `splice:` runs after a `ptoas:` that
runs (the raw output is rewritten then).
"""
from __future__ import annotations

from functools import partial

from ..core import stages
from ..core.stage_seam import NO_EFFECT, Done, Seen, Stage


def task_dicts(graph, _caches=None, _run=None) -> dict[str, list[dict]]:
    """`ptoas:` and `splice:` per `.pto` unit of `graph` (a sub-build's compiles wait for its splices:
    compile/stage.py names them)."""
    groups: dict[str, list[dict]] = {stages.PTOAS: [], stages.SPLICE: []}
    if not graph.pto.units:
        return groups
    from .actions import adopt_splice, record_adopted, record_seen, run_ptoas, run_splice
    from .checks import PtoasCheck, SpliceCheck

    for u in graph.pto.units:
        ptoas = stages.task(stages.PTOAS, u.name)
        groups[stages.PTOAS].append({
            "name": u.name,
            "doc": f"ptoas {u.pto} -> {u.raw}",
            "actions": [(run_ptoas, [u])],
            "file_dep": [u.pto],
            "targets": [u.raw],
            "uptodate": [PtoasCheck(u.pto, u.raw, u.ptoas_key, partial(record_seen, u))],
        })
        groups[stages.SPLICE].append({
            "name": u.name,
            "doc": f"splice the body of {u.raw} into the kernel files it defines",
            "actions": [(run_splice, [u])],
            "task_dep": [ptoas],
            "uptodate": [SpliceCheck(u.raw, ptoas, partial(adopt_splice, u), partial(record_adopted, u))],
        })
    return groups


NO_PTOAS = "ptoas not found (--allow-unapplied-pto)"


def done(_name: str, values: dict) -> Done:
    """A `ptoas:` that found no ptoas (accepted): skipped, said at once under -q; else the kernel files it
    spliced and the unedited `.pto` ptoas could not compile (their kernels kept)."""
    if values.get(NO_EFFECT):
        return Done({"not_applied": (values[NO_EFFECT],)}, NO_PTOAS, not_applied_line([values[NO_EFFECT]]))
    return Done({"spliced": tuple(values.get("spliced") or ()),
                 "pto_rejected": (values["rejected"],) if values.get("rejected") else ()})


def closing(seen: Seen) -> list[str]:
    """PyPTO's closing lines of the .pto stage, plus every edit that did not reach the kernels."""
    if not any(n.startswith(stages.PTO) for n in seen.outcomes):
        return []
    spliced, rejected = seen.tallied("spliced"), seen.tallied("pto_rejected")
    lines = [f"[pto->cpp] updated {len(spliced)} kernel cpp(s)"] if spliced else []
    if rejected:
        lines.append("[pto->cpp] kernels kept as they are (never seen edited; ptoas cannot compile): "
                     + ", ".join(sorted(rejected)))
    lines += unapplied(seen)
    return lines or ["[pto->cpp] no .pto changes detected"]


def unapplied(seen: Seen) -> list[str]:
    """The lines naming each `.pto` edit that did not reach the kernel files this run (none: []): accepted
    by --allow-unapplied-pto, or whose ptoas or splice failed."""
    failed = sorted(seen.names("failed", stages.PTO))
    lines = [not_applied_line(seen.tallied("not_applied"))] if seen.tallied("not_applied") else []
    if failed:
        lines.append(f"[pto->cpp] edits NOT applied: {', '.join(failed)} failed (see above)")
    return lines


def unapplied_sources(graph, result) -> list[str]:
    """The `.pto` files of `graph` whose edits did not reach the kernel files in the run `result` (a
    `BuildResult`): accepted by --allow-unapplied-pto, or whose ptoas or splice failed."""
    failed = {u.task.partition(":")[2] for u in result.failures if u.task.startswith(stages.PTO)}
    return sorted({*result.not_applied, *(u.pto for u in graph.pto.units if u.name in failed)})


def not_applied_line(units: list[str]) -> str:
    return "[pto->cpp] edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): " + \
        ", ".join(sorted(units))


STAGE = Stage(groups=(stages.PTOAS, stages.SPLICE), tasks=task_dicts, announced=False,
              follows=(stages.SPLICE,), done=done, closing=closing, warnings=unapplied)
