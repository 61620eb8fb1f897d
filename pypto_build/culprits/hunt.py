"""`pypto-build bisect DIR`: which units make the directory's current variant differ from a good one (`bisect`).

In a scratch copy (`scratch`: nothing of the user's is touched) the current sources are built (incrementally:
the copy keeps the build state), the good variant's binaries are fetched (the kept variants' store, a good
directory's files, or, when evicted, rebuilt from the kept source), and the program runs with mixes of the two
(`runs.Mixer`). Trace, where the platform's arguments dump carries payloads: one run of each variant with the dump,
and the first task whose outputs differ names its kernel (`trace.compare`); mix, on every platform and where the
trace cannot name a unit: the suspects are the units whose binaries differ, and delta debugging finds the smallest
set that makes the program fail (`search.find_culprits`).
"""
from __future__ import annotations

import difflib
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ..builddir.layout import classify, find_root
from ..builddir.markers import GOLDEN_PY
from ..errors import ArgumentError, UserError
from ..plan.program import Program, programs
from ..platforms import RECORDS
from ..variants.history import Variant
from ..variants.store import VariantStore, store_dir
from . import sides
from .report import AGREE, CULPRITS, GOOD_FAILS, UNNAMED, Culprit, Report, run_line
from .rebuild import rebuild_unit
from .runs import Mixer, Tolerance
from .scratch import Scratch, scratch

METHODS = ("trace", "mix")


@dataclass(frozen=True)
class Asked:
    """What the user asked of a bisect, besides the directory."""

    good: str | None                  # a variant id (None: the newest PASSED); a good directory is `other`
    other: Path | None                # --good DIR2
    method: str | None
    against_good: bool
    rtol: float | None
    atol: float | None
    cache_dir: str | None


def bisect(directory: Path | str, *, good: str | os.PathLike | None = None, method: str | None = None,
           against_good: bool = False, rtol: float | None = None, atol: float | None = None,
           platform: str | None = None, cache_dir: str | os.PathLike | None = None,
           say: Callable[[str], None] = lambda _line: None, start: Callable | None = None) -> list[Report]:
    """Compare `directory`'s current variant with `good` (None: the newest PASSED in its history; a variant id;
    a build directory of the same program) and name the culprit units; one `Report` per program (a multi-orch
    parent has one per sub-build with a golden.py). `say` hears each step and run as it goes; `start` starts each
    run's process (a caller's `run.WarmStarter.start`; None: a warm starter of the bisect's own)."""
    from ..options import Request
    from .. import pipeline

    if method is not None and method not in METHODS:
        raise ArgumentError(f"--method {method!r}: not a method; use trace or mix (default: trace where the "
                            "platform's dump carries payloads, else mix)")
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ArgumentError(f"--{name} {value}: not a tolerance; give a finite number >= 0")
    root = find_root(Path(directory))
    classify(root)
    other = _other_directory(good)
    request = Request.given(platform=platform, cache_dir=cache_dir, quiet=True)
    asked = Asked(None if good is None or other is not None else str(good), other, method, against_good, rtol, atol,
                  request.cache_dir)
    good_plans = request.plan(other).plans if other is not None else None
    reports = []
    with scratch(root, request.cache_dir) as work:
        say(f"[bisect] building the current sources in a copy of {root}")
        graph = request.plan(work.path)
        if good_plans is not None:
            sides.same_program(graph.plans, good_plans, other)
        starter = _warm(graph.platform.name) if start is None else None     # torch imported while it builds
        if method != "mix" and RECORDS[graph.platform.name].dump_payloads:
            _import_torch_meanwhile()           # the trace compares tensors here, after the runs
        try:
            pipeline.run(work.path, request, graph=graph, progress=None, check=True)
            for program in programs(graph):
                rel = Path(program.path).relative_to(work.path).as_posix()
                reports.append(_one(root, rel, program, graph, work, good_plans, asked, say, start or starter.start))
        finally:
            if starter is not None:
                starter.close()
    return reports


def _import_torch_meanwhile() -> None:
    """Import torch in this process in the background (about a second), while the copy builds and the program
    runs in other processes: the trace's comparison, which needs it, then does not wait for it."""
    import importlib
    import threading

    threading.Thread(target=importlib.import_module, args=("torch",), daemon=True,
                     name="pypto-build-bisect-import").start()


def _warm(platform: str):
    """A warm starter whose server imports torch and the runtime now, in the background: every run is forked
    from it (`run.WarmStarter`)."""
    import threading

    from ..run import WarmStarter

    starter = WarmStarter(platform)
    starter.start_server()                          # from this thread: the server lives as long as it does
    threading.Thread(target=starter.warm_up, daemon=True, name="pypto-build-bisect-warm-up").start()
    return starter


def _other_directory(good: str | os.PathLike | None) -> Path | None:
    """`good` when it names a directory (--good DIR2), else None (a variant id, or the newest PASSED)."""
    if good is None:
        return None
    path = Path(good)
    if path.is_dir():
        return find_root(path)
    if os.sep in str(good) or str(good).startswith("."):
        raise UserError(f"--good {good}: no such directory; give a build directory of the same program, or a "
                        "variant id `pypto-build history DIR` prints")
    return None


def _one(root: Path, rel: str, program: Program, graph, work: Scratch, good_plans, asked: Asked,
         say: Callable[[str], None], start: Callable) -> Report:
    """The bisect of one program of the scratch copy."""
    where = root if rel == "." else root / rel
    payloads = RECORDS[program.platform].dump_payloads
    if asked.method == "trace" and not payloads:
        raise UserError(f"{where}: --method trace needs an arguments dump with payloads, which {program.platform} "
                        "does not write; use --method mix")
    current = sides.current(Path(program.path), graph.plans, rel)
    if asked.other is not None:
        good_side = sides.from_directory(asked.other, good_plans, rel)
    else:
        good_side = sides.from_history(where, asked.good)
    sides.same_units(current, good_side)
    suspects = [u.task for u in current.units if u.binary_digest != good_side.unit(u.binary).binary_digest]
    say(f"[bisect] {where}: current {current.variant[:10]} against {good_side.label}: "
        f"{len(suspects)} of {len(current.units)} unit(s) differ")
    if not suspects:
        return Report(where, good_side.label, current.variant, asked.method or "mix", AGREE,
                      notes=("the two variants run the same binaries",))
    against = _tolerance(Path(program.path), asked.against_good, asked.rtol, asked.atol)
    store = VariantStore(store_dir(asked.cache_dir))
    notes = _fetch(work, current, good_side, suspects, store, asked.cache_dir, say)
    mixer = Mixer(work, program, program.config(None), good_side, current, suspects, against=against,
                  on_run=lambda r: say(f"[bisect] {run_line(len(mixer.runs), r)}"), start=start)
    chosen = asked.method or ("trace" if payloads else "mix")
    return _search(where, good_side, current, suspects, mixer, work, graph, rel, chosen, asked.method == "trace",
                   notes, store, say)


def _search(where: Path, good_side: sides.Side, current: sides.Side, suspects: list[str], mixer: Mixer,
            work: Scratch, graph, rel: str, chosen: str, forced: bool, notes: tuple[str, ...],
            store: VariantStore, say: Callable[[str], None]) -> Report:
    """Trace (`chosen`), then mix where the trace names no unit unless the trace was `forced`; or mix alone."""
    found: dict = {"first": None, "parting": None, "culprits": (), "notes": ()}
    known: dict = {}
    if chosen == "trace":
        from .traced import traced

        found, known = traced(mixer, work, graph, rel, suspects, say)
        notes = (*notes, *found.get("notes", ()))
        if found.get("outcome"):
            return _report(where, good_side, current, "trace", found["outcome"], (), suspects, found, mixer, notes,
                           store)
        if found["culprits"] or forced:
            return _report(where, good_side, current, "trace", CULPRITS if found["culprits"] else UNNAMED,
                           found["culprits"], suspects, found, mixer, notes, store)
        chosen = "trace+mix"
    from .search import find_culprits

    if mixer.against is not None and "good" not in known:
        known["good"] = mixer.run(frozenset(), "all good (the reference outputs)").fails
    elif "good" not in known and good_side.recorded is not None:
        notes = (*notes, *_reuse_good(mixer, good_side.recorded, known))
    before = len(mixer.runs)
    search = find_culprits(suspects, lambda mixed: mixer.run(mixed, "mix").fails,
                           current_fails=known.get("current"), good_fails=known.get("good"))
    mixer.runs[before:] = [replace(r, why=p.why) for r, p in zip(mixer.runs[before:], search.probes)]
    outcome = {"culprits": CULPRITS, "agree": AGREE}.get(search.verdict, GOOD_FAILS)
    return _report(where, good_side, current, chosen, outcome, search.culprits, suspects, found, mixer, notes, store)


def _reuse_good(mixer: Mixer, good: Variant, known: dict) -> tuple[str, ...]:
    """The current variant runs first; when the good one's PASSED verdict was made on the very golden result that
    run was compared against, with the same run configuration, it holds for the same binaries now (as `validate`
    reuses a verdict): the good variant is not run again. The note that says so."""
    if "current" not in known:
        known["current"] = mixer.run(frozenset(mixer.suspects), "all current").fails
    ran = next((r for r in reversed(mixer.runs) if set(r.current) == set(mixer.suspects)), None)
    seal = ran.golden if ran is not None else None
    if good.verdict == "PASSED" and seal and good.golden == seal and good.config == mixer.config.key():
        known["good"] = False
        return (f"the good variant's PASSED verdict on this golden result holds (recorded "
                f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(good.last_seen))}): not run again",)
    return ()


def _tolerance(program_dir: Path, against_good: bool, rtol: float | None, atol: float | None) -> Tolerance | None:
    """The oracle: None for golden.py's comparison; else the tolerance the outputs are held to against the good
    run's (the given one, else golden.py's RTOL/ATOL)."""
    from ..run import load_golden

    if not (program_dir / GOLDEN_PY).is_file():
        raise UserError(f"{program_dir / GOLDEN_PY}: not found; a bisect runs the program on golden.py's "
                        "generate_inputs (and, without --against-good, compares with its compute_golden)")
    if not against_good:
        return None
    loaded = load_golden(program_dir) if rtol is None or atol is None else None
    return Tolerance(loaded.rtol if rtol is None else rtol, loaded.atol if atol is None else atol)


def _fetch(work: Scratch, current: sides.Side, good: sides.Side, suspects: list[str], store: VariantStore,
           cache_dir: str | None, say: Callable[[str], None]) -> tuple[str, ...]:
    """Keep both variants' binaries of the suspects aside in the work folder; the notes of what had to be rebuilt."""
    for task in suspects:
        unit = current.named(task)
        work.stash(unit.binary_digest, current.where / unit.binary)
    notes = []
    for task in suspects:
        unit, now = current.pair(good, task)
        if good.where is not None:
            work.stash(unit.binary_digest, good.where / unit.binary)
        elif not store.restore(unit.binary_digest, work.stashed(unit.binary_digest)):
            say(f"[bisect] {task}: the good binary was evicted from the store; rebuilding it from its kept source")
            notes.append(rebuild_unit(work, current.where, store, now, unit, cache_dir))
    return tuple(notes)


def _report(where: Path, good: sides.Side, current: sides.Side, method: str, outcome: str, culprits, suspects,
            found: dict, mixer: Mixer, notes: tuple[str, ...], store: VariantStore) -> Report:
    named = tuple(_culprit(good, current, task, store) for task in culprits)
    return Report(where, good.label, current.variant, method, outcome, named, tuple(suspects), found.get("first"),
                  found.get("parting"), tuple(mixer.runs), notes)


def _culprit(good: sides.Side, current: sides.Side, task: str, store: VariantStore) -> Culprit:
    """A culprit with its source's diff against the good variant's (from the kept sources)."""
    was, now = current.pair(good, task)
    if was.source_digest == now.source_digest:
        return Culprit(task, now.source, (), "its source is the same; its binary differs (a header, a flag or "
                       "the compiler changed)")
    old, new = _source_text(good, was, store), _source_text(current, now, store)
    if old is None or new is None:
        return Culprit(task, now.source, (), "its source changed; the good one is no longer kept")
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"good/{was.source}",
                                     f"current/{now.source}", lineterm="", n=2))
    return Culprit(task, now.source, tuple(diff))


def _source_text(side: sides.Side, unit, store: VariantStore) -> str | None:
    if side.where is not None:
        try:
            return (side.where / unit.source).read_text(errors="replace")
        except OSError:
            return None
    data = store.read(unit.source_digest) if unit.source_digest else None
    return data.decode(errors="replace") if data is not None else None

