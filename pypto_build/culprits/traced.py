"""The trace step of a bisect: one run of each variant with the arguments dump, compared task by task.

The current variant runs first, then the good one (with `--against-good` first: that run is the reference), each
with `enable_dump_args` 2, in the scratch copy; their dumps are copied aside and compared (`trace.compare`,
within golden.py's RTOL/ATOL or the tolerance given). A good variant's dump is kept (`KEPT` newest, beside the
scratch) under its variant and the content of the golden result its run was compared against (which is keyed on
golden.py's inputs): the next trace against it on the same inputs runs the current variant only.

The first task whose outputs differ names its kernel; when that kernel's unit is one of the suspects, the task
was given the same inputs and nothing before it went uncompared, it is the culprit. Otherwise (the sequences
part, the task was given other inputs, its kernel is not a suspect, a record could not be compared, an L3
dispatch whose chip the dump does not say) the trace says what it saw and the mix goes on, knowing both
endpoints. An L3 run writes one dump per rank and dispatch (`rank<r>/d<k>/args_dump`): they are compared in that
order and the first that differs is reported with its place.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..builddir.markers import ARGS_DUMP_DIR
from ..errors import UserError, one_line
from .report import AGREE, GOOD_FAILS
from .runs import Mixer, Tolerance
from .scratch import Scratch


def traced(mixer: Mixer, work: Scratch, graph, rel: str, suspects: list[str],
           say: Callable[[str], None]) -> tuple[dict, dict]:
    """(what the trace found: `first`, `parting`, `culprits`, `outcome` when it ends the bisect, `notes`; the
    endpoints' answers for the mix: `good`, `current`)."""
    dumps = work.work / "dumps"
    known: dict = {}
    if mixer.against is not None:                     # the good run makes the reference outputs: first
        known["good"] = mixer.run(frozenset(), "all good, with the arguments dump", dump=dumps / "good").fails
        if known["good"]:
            return {"outcome": GOOD_FAILS}, known
    current = mixer.run(frozenset(suspects), "all current, with the arguments dump", dump=dumps / "current")
    known["current"] = current.fails
    if not current.fails:
        return {"outcome": AGREE}, known
    if "good" not in known:
        kept = _kept(work, mixer)
        if kept is not None and kept.is_dir():
            shutil.copytree(kept, dumps / "good")
            known["good"] = False
            say("[bisect] the good variant's dump on these inputs is kept: not run again")
        else:
            known["good"] = mixer.run(frozenset(), "all good, with the arguments dump", dump=dumps / "good").fails
            if known["good"]:
                return {"outcome": GOOD_FAILS}, known
            if kept is not None:
                _keep(dumps / "good", kept)
    tolerance = mixer.against or _golden_tolerance(Path(mixer.program.path))
    try:
        result, place = _compare(dumps / "good", dumps / "current", tolerance, _kernels(graph, rel))
    except UserError as exc:
        return {"culprits": (), "notes": (f"the trace could not compare the dumps ({one_line(exc, 300)})",)}, known
    if result is None:
        return {"culprits": (), "notes": ("the runs wrote no arguments dump to compare",)}, known
    first = result.first
    if first is not None:             # named as in the user's directory, not the copy
        source = first.source
        if source is not None and Path(source).is_relative_to(work.path):
            source = Path(source).relative_to(work.path)
        first = replace(first, kernel=_placed(first.kernel, place), source=source)
    found = {"first": first, "parting": result.parting, "culprits": (), "notes": ()}
    unit = _unit_of(graph, rel, first) if first is not None and not place else None
    if result.parting is not None:
        found["notes"] = ("the two task sequences part: the mix finds the units that make them",)
    elif first is None:
        found["notes"] = ("every task's outputs agree within the tolerance, yet the verdicts differ: the mix "
                          "finds the units",)
    elif not result.certain:
        found["notes"] = ("an output before the first divergent task could not be compared (truncated, "
                          "overwritten or dropped): the mix confirms",)
    elif (given := _given(dumps, place, first.index, tolerance)) is not None:
        found["notes"] = (f"the first divergent task was given other inputs ({given}): the mix finds the units "
                          "that make them",)
    elif unit is None or unit not in suspects:
        found["notes"] = (f"the first divergent task's kernel ({first.kernel or first.func_id}) did not change: "
                          "the mix finds the units that make it differ",)
    else:
        found["culprits"] = (unit,)
    seen = f"first divergent task {first.index} ({first.kernel})" if first else "no task's outputs differ"
    say(f"[bisect] trace: {seen}" + (f"; {result.parting.describe()}" if result.parting else ""))
    return found, known


KEPT = 2                # good variants' dumps kept per directory (a dump holds every task's tensors: large)


def _kept(work: Scratch, mixer: Mixer) -> Path | None:
    """Where the good variant's dump on this run's inputs is kept: by the good variant and the content of the
    golden result the program's runs were compared against (None: no golden result, nothing kept)."""
    from ..builddir.state_dir import GOLDEN, STATE_DIR
    from ..core.hashing import file_digest, text_digest

    golden = Path(mixer.program.path) / STATE_DIR / GOLDEN
    files = sorted(p for p in golden.rglob("*") if p.is_file()) if golden.is_dir() else []
    if not files:
        return None
    seal = text_digest(*(f"{p.relative_to(golden).as_posix()}={file_digest(str(p))}" for p in files))
    return work.kept_dumps / f"{mixer.good.variant[:16]}-{seal[:16]}"


def _keep(dump: Path, kept: Path) -> None:
    """Keep `dump` as `kept` (whole or not at all), and only the `KEPT` newest."""
    tmp = kept.with_name(kept.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(dump, tmp)
    shutil.rmtree(kept, ignore_errors=True)
    os.replace(tmp, kept)
    old = sorted((p for p in kept.parent.iterdir() if not p.name.endswith(".tmp")), key=lambda p: p.stat().st_mtime)
    for stale in old[:-KEPT]:
        shutil.rmtree(stale, ignore_errors=True)


def _given(dumps: Path, place: str, index: int, tolerance: Tolerance) -> str | None:
    """Whether task `index` of the two dumps at `place` was given other inputs (`trace.inputs_differ`)."""
    from .dump import read_dump
    from .trace import inputs_differ

    folder = Path(place or ".") / ARGS_DUMP_DIR
    good, current = read_dump(dumps / "good" / folder), read_dump(dumps / "current" / folder)
    return inputs_differ(good.tasks[index], current.tasks[index], tolerance.rtol, tolerance.atol)


def _golden_tolerance(program_dir: Path) -> Tolerance:
    from ..run import load_golden

    golden = load_golden(program_dir)
    return Tolerance(golden.rtol, golden.atol)


def _compare(good: Path, current: Path, tolerance: Tolerance, kernels: dict):
    """The comparison of the first pair of dumps that differ (L2: the one pair), and its place (an L3 dispatch's
    `rank<r>/d<k>`, "" for an L2 run); (None, "") when no dump was written."""
    from .dump import read_dump
    from .trace import compare

    places = sorted(p.parent.relative_to(good).as_posix() for p in good.rglob(ARGS_DUMP_DIR) if p.is_dir())
    result = None
    for place in places:
        where = "" if place == "." else place
        result = compare(read_dump(good / place / ARGS_DUMP_DIR), read_dump(current / place / ARGS_DUMP_DIR),
                         tolerance.rtol, tolerance.atol, kernels if not where else None)
        if result.first is not None or result.parting is not None:
            return result, where
    return result, ""


def _kernels(graph, rel: str) -> dict:
    """func_id -> KernelInfo of the program's own sub-build (an L2 program, or a multi-orch sub-build)."""
    from .kernels import kernels_of

    plan = _plan(graph, rel)
    return kernels_of(plan.sub) if plan is not None else {}


def _plan(graph, rel: str):
    """The sub-build plan of the L2 program at `rel` (None for an L3 program: one per chip)."""
    plans = graph.plans if rel == "." else [p for p in graph.plans if p.sub.rel == rel]
    return plans[0] if len(plans) == 1 else None


def _unit_of(graph, rel: str, first) -> str | None:
    """The compile unit of the first divergent task's kernel (its func_id in kernel_config.py)."""
    plan = _plan(graph, rel)
    if plan is None or len(first.func_id) != 1:
        return None
    for spec, unit in zip(plan.sub.config.kernels, [u for u in plan.units if u.kind == "kernel"]):
        if spec.func_id == first.func_id[0]:
            return unit.task
    return None


def _placed(kernel: str | None, place: str) -> str | None:
    return f"{kernel or '?'} in {place}" if place else kernel
