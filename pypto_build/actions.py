"""doit actions: the side-effect edge of the graph.

Module-level functions with plain-data arguments, so they work under every
multiprocessing start method. Each writes its outputs atomically and returns
the values doit stores for the next run's up-to-date check.
"""
from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING

from doit.exceptions import TaskFailed

from . import atomic, compile_cache, procs
from .checker import make_state
from .depfile import parse_depfile
from .layout import inside
from .oserrors import FREE_SPACE, one_line_failures
from .stamp import remove_stamp, write_stamp
from .units import CompileUnit

if TYPE_CHECKING:
    from .remote_cache import Remote


@one_line_failures
def run_compile(unit: CompileUnit, compiler_id: str, context: str | None, cache_dir: str | None = None,
                remote: Remote | None = None):
    """Compile one unit into a temp file, then move it onto its output.

    Returns the values recorded for the next up-to-date check: argv, compiler
    and context digests, the state of every header the compiler read, and the
    state of the output. On failure returns TaskFailed with the command and the
    compiler's message; other outputs are untouched. With an artefact cache (and
    a known identity) a matching binary is restored instead of compiled, and a
    fresh one is stored.
    """
    sub = Path(unit.sub_rel)
    remove_stamp(Path(unit.stamp))            # the sub-build is in flux until every unit is built
    out = Path(unit.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.remove_stale_temps(out)            # left by a run that was killed while compiling this unit
    cache = compile_cache.open_cache(cache_dir, remote) if context is not None else None
    base = compile_cache.base_key(unit.kind, unit.argv_key, compiler_id, context, unit.source) if cache else ""
    if cache is not None:
        start_ns = time.time_ns()
        hit = compile_cache.lookup(cache, base, unit.sub_rel, out)
        if hit is not None:
            escape = _escape(unit, Path("."), hit)       # an entry another directory's run stored
            if escape:
                out.unlink(missing_ok=True)
                return TaskFailed(escape)
            return {**_values(unit, compiler_id, context, hit, start_ns), "cache": "hit"}
    tmp_out = atomic.temp_path_for(out)
    tmp_dep = atomic.temp_path_for(out, ".d.tmp")
    out_arg = procs.path_arg(os.path.relpath(out, sub))
    argv = list(unit.argv)
    o = len(argv) - 1 - argv[::-1].index("-o")
    argv[o + 1] = procs.path_arg(os.path.relpath(tmp_out, sub))
    argv[o:o] = ["-MMD", "-MF", procs.path_arg(os.path.relpath(tmp_dep, sub)), "-MT", out_arg,
                 f"-ffile-prefix-map={os.path.abspath(sub)}=."]
    start_ns = time.time_ns()
    try:
        try:
            proc = procs.run(argv, cwd=sub, timeout=unit.timeout)
        except OSError as exc:
            return TaskFailed(_failure(unit, f"cannot run the compiler: {exc}"))
        if proc.timed_out:
            return TaskFailed(_failure(unit, proc.output, f"compiler timed out after {unit.timeout:g} s (killed with "
                                       "every process it started; raise PYPTO_COMPILER_TIMEOUT)"))
        if proc.returncode != 0:
            return TaskFailed(_failure(unit, proc.output or proc.how))
        deps = _read_depfile(tmp_dep)
        if deps is None:
            return TaskFailed(_failure(unit, "the compiler wrote no dependency file (-MMD -MF), so the headers "
                                             "it read cannot be checked; use a gcc-compatible CXX"))
        escape = _escape(unit, sub, deps)
        if escape:
            out.unlink(missing_ok=True)          # no binary built from an outside header stays installed
            return TaskFailed(escape)
        headers = _headers(deps, sub, unit.source, unit.covered)
        os.replace(tmp_out, out)
    finally:
        for leftover in (tmp_out, tmp_dep):
            leftover.unlink(missing_ok=True)
    values = _values(unit, compiler_id, context, headers, start_ns)
    if cache is not None and all(state[4] is not None for state in values["headers"].values()):
        compile_cache.store(cache, base, unit.sub_rel, list(values["headers"]), out)
    return values


def _values(unit: CompileUnit, compiler_id: str, context: str | None, headers: list[str], start_ns: int) -> dict:
    return {
        "argv": unit.argv_key,
        "compiler": compiler_id,
        "context": context,
        "headers": {h: make_state(h, changed_since_ns=start_ns) for h in headers if os.path.exists(h)},
        "output": make_state(unit.output),
    }


@one_line_failures
def run_stamp(stamp_path: str, stamp: dict | None, why_unknown: str | None):
    """Write the sub-build's binary_context.json once all its binaries are built.

    With an unknown identity no stamp is written (and a stale one is removed).
    """
    if stamp is None:
        remove_stamp(Path(stamp_path))
        return {"stamp": None, "why": why_unknown}
    write_stamp(Path(stamp_path), stamp)
    return {"stamp": stamp}


def _read_depfile(depfile: Path) -> list[str] | None:
    """Every file the compiler read (system headers aside), as written; None without a depfile."""
    try:
        return parse_depfile(depfile.read_text(encoding="utf-8", errors="surrogateescape"))
    except OSError:
        return None


def _escape(unit: CompileUnit, sub: Path, deps: list[str]) -> str | None:
    """One line about the first dependency outside the build directory and the unit's include roots."""
    root = os.path.realpath(".")                 # actions run in the build root
    for dep in deps:
        real = os.path.realpath(os.path.join(sub, dep))
        if not inside(real, root) and not any(inside(real, r) for r in unit.include_roots):
            return (f"{unit.task}: {unit.source} includes {dep}, which resolves outside the build directory "
                    f"(to {real}); keep headers inside the build directory (an external kernel may also use "
                    "its own directory and its extra_include_dirs) — binary not installed")
    return None


def _headers(deps: list[str], sub: Path, source: str, covered: tuple[str, ...]) -> list[str]:
    """The depfile's headers, as paths relative to the build root.

    Headers under `covered` roots are left out: an identity covers them.
    """
    found = []
    for dep in deps:
        path = dep if os.path.isabs(dep) else os.path.normpath(os.path.join(sub, dep))
        if any(path.startswith(root + os.sep) for root in covered):
            continue
        if path != source and path not in found:
            found.append(Path(path).as_posix())
    return found


def _failure(unit: CompileUnit, message: str, first: str | None = None) -> str:
    """One line (the source, `first` or the compiler's first error, the fix), then the command and its
    output (capped by procs)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = first or next((line for line in lines if "error" in line), lines[0] if lines else "failed")
    cmd = shlex.join(unit.argv)
    full = next((why for why in _DISK_FULL if why in message), None)
    head = (f"{unit.source}: compiling failed: {full.lower()} (the compiler could not write {unit.output}, its "
            f"dependency file or its temp files); {FREE_SPACE}" if full else
            f"{unit.source}: compiling failed: {first[:400]} — fix it and rebuild")
    return f"{head} ({unit.task})\n  command (in {unit.sub_rel}): {cmd}\n{message}"


_DISK_FULL = ("No space left on device", "Disk quota exceeded")     # strerror(ENOSPC / EDQUOT) in a tool's output
