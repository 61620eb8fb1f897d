"""The compile stage's doit actions: compile a unit (`run_compile`), write a sub-build's stamp (`run_stamp`).

The side-effect edge of the graph. Module-level functions with plain-data arguments, so they work under every
multiprocessing start method. Each writes its outputs atomically and returns
the values doit stores for the next run's up-to-date check.
"""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from doit.exceptions import TaskFailed

from ..core import atomic, procs
from . import header_sets
from ..cache import compile_key, open_cache, restore_compile, store_compile
from ..core.filestate import digest_of, make_state
from .depfile import TRACKING, DepfileError, as_named, read_depfile
from ..toolchain.identity import identity_covers
from ..errors import ToolchainError
from .command import compile_command, listed, splits
from ..toolchain.launcher import compiled_object, linked_binary
from ..toolchain.local_slots import slot
from ..core.confine import inside
from ..core.oserrors import FREE_SPACE, one_line_failures
from ..core.racy import fs_now
from ..builddir.stamp import binary_context_lock, remove_stamp, write_stamp
from .plan import CompileUnit
from .prelude_actions import drop, rejected, take, with_prelude

if TYPE_CHECKING:
    from ..cache import Remote
    from ..core.shared_flag import SharedFlag
    from ..toolchain.launcher import Launcher
    from .prelude import PreludeUnit


@one_line_failures
def run_compile(unit: CompileUnit, compiler_id: str, context_digest: str | None, state: str, cache_dir: str | None = None,
                remote: Remote | None = None, launcher: Launcher | None = None, prelude: PreludeUnit | None = None,
                store: str | None = None, dropped: SharedFlag | None = None, began: bool = True):
    """Compile one unit into a temp file, then move it onto its output.

    Returns the values recorded for the next up-to-date check: argv, compiler
    and context digests, the state of every header the compiler read, and the
    state of the output (and `kept: identical` when the output already held the very bytes built: its file
    was left as it was). On failure returns TaskFailed with the command and the
    compiler's message; other outputs are untouched. With an artefact cache (and
    a known identity) a matching binary is restored instead of compiled, and a
    fresh one is stored. `state`: the platform's state folder, where the states of headers outside the
    build directory are kept (`header_sets`). `prelude`: the precompiled prelude planned for it, in the
    store `store` (`prelude_actions`: taken only when exact; never part of its identity; `began`: its kernel
    began with it when planned); `dropped`: the run's flag raised (and said) once a precompiled header was
    rejected or failed a compile.
    """
    sub = Path(unit.cwd or unit.sub_rel)      # the compiler's working directory; argv paths are relative to it
    remove_stamp(Path(unit.stamp_path))            # the sub-build is in flux until every unit is built
    out = Path(unit.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.remove_stale_temps(out)            # left by a run that was killed while compiling this unit
    cache = open_cache(cache_dir, remote) if context_digest is not None else None
    base = compile_key(unit.kind, unit.argv_key, compiler_id, context_digest, unit.source) if cache else ""
    if cache is not None:
        start_ns = fs_now(out)
        hit = restore_compile(cache, base, unit.sub_rel, out)
        if hit is not None:
            # an entry another directory's run stored: its headers pass the same checks as a compile's
            states = _escape(unit, Path("."), hit) or _header_states(unit, _headers(hit, Path("."), unit), start_ns)
            if isinstance(states, str):
                out.unlink(missing_ok=True)
                return TaskFailed(states)
            values = _values(unit, compiler_id, context_digest, state, states)
            return values if isinstance(values, TaskFailed) else {**values, "cache": "hit"}
    tmp_out = atomic.temp_path_for(out)
    tmp_dep = atomic.temp_path_for(out, ".d.tmp")
    tmp_obj = atomic.temp_path_for(out, ".tmp.o") if splits(unit, launcher) else tmp_out
    start_ns = fs_now(out)                # a header with a later ctime may differ from what was read
    use = take(unit, prelude, store, launcher, dropped, began)
    command = compile_command(unit, tmp_out, tmp_dep, tmp_obj, launcher, prelude=use.flags if use else ())
    try:
        done = _run_tool(unit, command.compile, sub, env=launcher.env() if command.launched else None)
        if use is not None and use.flags and (isinstance(done, TaskFailed) or rejected(use, done.output)):
            failed = isinstance(done, TaskFailed)           # again without: the plain compile's verdict counts
            command = compile_command(unit, tmp_out, tmp_dep, tmp_obj, launcher)
            done = _run_tool(unit, command.compile, sub)
            if not failed:
                use = drop(use, "GCC rejected the precompiled header (-Winvalid-pch)", dropped, forget=True)
            elif not isinstance(done, TaskFailed):
                use = drop(use, "a compile failed with the precompiled header and not without it", dropped,
                           forget=False)
            else:
                use = use.plain("the compile failed")
        if isinstance(done, TaskFailed):
            return done
        if command.launched:
            launcher.note_fallback(done.output)
            try:
                made = compiled_object(launcher, os.fspath(tmp_obj))
                with slot():
                    done = _run_tool(unit, command.link, sub, "linking")
                if isinstance(done, TaskFailed):
                    return done
                linked_binary(launcher, os.fspath(tmp_out), made, unit.entry)
            except ToolchainError as exc:       # the launcher's output is not this compile's: nothing installed
                return TaskFailed(_failure(unit, str(exc), str(exc), fix="", command=command.compile))
        try:
            deps = read_depfile(tmp_dep, command.target)
            deps = with_prelude(use, deps, os.fspath(sub)) if deps is not None else None
        except DepfileError as exc:
            out.unlink(missing_ok=True)
            return TaskFailed(_failure(unit, f"the compiler's dependency file cannot be read exactly ({exc}), so "
                                             "the headers it read cannot be checked — binary not installed",
                                       command=command.compile))
        if deps is None:
            return TaskFailed(_failure(unit, "the compiler wrote no dependency file (-MD -MF), so the headers "
                                             "it read cannot be checked; use a gcc-compatible CXX",
                                       command=command.compile))
        escape = _escape(unit, sub, deps)
        if escape:
            out.unlink(missing_ok=True)          # no binary built from an outside header stays installed
            return TaskFailed(escape)
        states = _header_states(unit, _headers(deps, sub, unit), start_ns)
        if isinstance(states, str):
            out.unlink(missing_ok=True)
            return TaskFailed(states)
        moved = atomic.install(tmp_out, out)  # an identical binary (PyPTO's, say) keeps its file
    finally:
        for leftover in (tmp_out, tmp_dep, tmp_obj):
            leftover.unlink(missing_ok=True)
    within, outside = states
    if cache is not None and all(digest_of(state) is not None for state in (*within.values(), *outside.values())):
        store_compile(cache, base, unit.sub_rel, [*within, *outside], out)
    values = _values(unit, compiler_id, context_digest, state, states)
    if isinstance(values, TaskFailed):
        return values
    values = values if moved else {**values, "kept": "identical"}   # the summary says so (the reporter)
    return values if use is None else {**values, "prelude": use.how}


def _run_tool(unit: CompileUnit, argv: Sequence[str], sub: Path, doing: str = "compiling",
              env: dict[str, str] | None = None) -> procs.Completed | TaskFailed:
    """Run one command of a unit's compile (`doing`: compiling | linking); its failure as the task's."""
    tool = "compiler" if doing == "compiling" else "linker"
    try:
        proc = procs.run(list(argv), cwd=sub, timeout=unit.timeout, env=env)
    except OSError as exc:
        return TaskFailed(_failure(unit, f"cannot run the {tool}: {exc}", doing=doing, command=argv))
    if proc.timed_out:
        return TaskFailed(_failure(unit, proc.output, f"{tool} timed out after {unit.timeout:g} s (killed with every "
                                   "process it started; raise PYPTO_COMPILER_TIMEOUT)", doing, command=argv))
    if proc.returncode != 0:
        return TaskFailed(_failure(unit, proc.output or proc.how, doing=doing, command=argv))
    return proc


def _values(unit: CompileUnit, compiler_id: str, context_digest: str | None, state: str,
            states: tuple[dict, dict]) -> dict | TaskFailed:
    """What the next check compares; the headers outside the build directory as a shared set (header_sets, in
    the state folder `state`)."""
    within, outside = states
    try:
        shared = header_sets.store(outside, state) if outside else None
    except OSError as exc:
        return TaskFailed(_failure(unit, f"cannot record the headers it read ({exc})"))
    return {"argv": unit.argv_key, "compiler": compiler_id, "context": context_digest, "tracking": TRACKING,
            "headers": within, "outside": shared, "output": make_state(unit.output)}


def _header_states(unit: CompileUnit, headers: tuple[list[str], list[str]], start_ns: int) -> tuple[dict, dict] | str:
    """The states of the headers inside and outside the build directory (no digest when a header may
    have changed since `start_ns`), or one line."""
    found: tuple[dict, dict] = ({}, {})
    for states, paths in zip(found, headers):
        for header in paths:
            try:
                states[header] = make_state(header, changed_since_ns=start_ns)
            except OSError as exc:
                return (f"{unit.task}: {unit.source} includes {header}, which cannot be read after the compile "
                        f"({exc.strerror or exc}); rebuild — binary not installed")
    return found


@one_line_failures
def run_stamp(stamp_path: str, fields: dict | None, why_unknown: str | None):
    """Write the sub-build's binary_context.json once all its binaries are built.

    `fields`: the context's `stamp_fields()`; None (an unknown identity): no stamp is written, and a stale one
    is removed.
    """
    with binary_context_lock(Path(stamp_path)):
        if fields is None:
            remove_stamp(Path(stamp_path))
            return {"stamp": None, "why": why_unknown}
        write_stamp(Path(stamp_path), fields)
    return {"stamp": fields}       # the key the reporter reads (kept in doit's state)


def _escape(unit: CompileUnit, sub: Path, deps: list[str]) -> str | None:
    """One line about the first dependency that is gone, or outside the build directory and the include roots.

    Include roots are the unit's own (`CompileUnit.include_roots`: identity-covered roots, every
    -I/-isystem/... of its argv, the compiler's built-in search directories).
    """
    root = os.path.realpath(".")                 # actions run in the build root
    for dep in deps:
        try:
            real = os.path.realpath(os.path.join(sub, dep), strict=True)
        except OSError:
            # A name a depfile cannot represent reads back as another, missing one: never assume it is inside.
            return (f"{unit.task}: {unit.source} includes {dep!r}, which does not exist after the compile (removed "
                    "meanwhile, or a header name with a newline or a trailing backslash, which a depfile cannot "
                    "represent); rename the header or rebuild — binary not installed")
        if not inside(real, root) and not any(inside(real, r) for r in unit.include_roots):
            return (f"{unit.task}: {unit.source} includes {dep}, which resolves outside the build directory "
                    f"(to {real}); keep headers inside the build directory (an external kernel may also use "
                    "its own directory and its extra_include_dirs) — binary not installed")
    return None


def _headers(deps: list[str], sub: Path, unit: CompileUnit) -> tuple[list[str], list[str]]:
    """The depfile's headers (system ones too) inside and outside the build directory, as paths relative
    to the build root (outside it: as the compiler named them, usually absolute).

    Left out: the source, and headers whose content an identity vouches for
    (`identity.identity_covers`). A path is shortened (`a/b/../c.h` -> `a/c.h`)
    only when the short form is the same file, as ccache does: through a
    symbolic link, `..` does not undo the step before it.
    """
    found: tuple[list[str], list[str]] = ([], [])
    root = os.path.realpath(".")
    skip = os.path.realpath(unit.source)
    for dep in deps:
        joined = os.path.join(sub, dep)
        real = os.path.realpath(joined)
        if real == skip or identity_covers(real, unit.covered):
            continue
        path = Path(as_named(joined)).as_posix()
        kind = found[0] if inside(real, root) else found[1]
        if path not in kind:
            kind.append(path)
    return found


def _failure(unit: CompileUnit, message: str, first: str | None = None, doing: str = "compiling",
             fix: str | None = None, command: Sequence[str] = ()) -> str:
    """One line (the source, `first` or the compiler's first error, the fix: `fix`, else `_fix`'s), then the
    command that ran (`command`; else the unit's compile as compile_commands.json lists it) and its output
    (capped by procs)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = first or next((line for line in lines if "error" in line), lines[0] if lines else "failed")
    cmd = shlex.join(command or listed(unit).compile)
    full = next((why for why in _DISK_FULL if why in message), None)
    head = (f"{unit.source}: compiling failed: {full.lower()} (the compiler could not write {unit.output}, its "
            f"dependency file or its temp files); {FREE_SPACE}" if full else
            f"{unit.source}: {doing} failed: {first[:400]}" + (f" — {_fix(first)}" if fix is None else fix))
    return f"{head} ({unit.task})\n  command (in {unit.cwd or unit.sub_rel}): {cmd}\n{message}"


def _fix(error: str) -> str:
    """What to do about a compile error: a PTO-ISA header that is not found needs PTO_ISA_ROOT."""
    missing = _MISSING_HEADER.search(error)
    if missing and missing.group(1).startswith(("pto/", "pto-")):
        return (f"PTO-ISA headers are missing ({missing.group(1)}): set PTO_ISA_ROOT to a pto-isa checkout "
                "(the host platform's fallback headers cover pto/pto-inst.hpp only), then rebuild")
    return "fix it and rebuild"


_MISSING_HEADER = re.compile(r"fatal error: ([^:\s]+): No such file or directory")
_DISK_FULL = ("No space left on device", "Disk quota exceeded")     # strerror(ENOSPC / EDQUOT) in a tool's output
