"""doit actions of the `.pto` stage: run ptoas, splice its body into kernel files.

Both return their PyPTO-style progress lines in `lines` (the reporter prints
them) and never leave a torn file: ptoas writes a temp file that is renamed
onto `ptoas/<unit>.cpp`; a splice checks every target first (sentinels,
signatures), backs up hand-edited bodies, then writes each file atomically.
"""
from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

from doit.exceptions import TaskFailed

from ..core import atomic, procs
from ..core.filestate import make_state
from ..errors import PyptoBuildError, SpliceError, one_line, say_fix
from ..core.hashing import file_digest, text_digest
from ..core.confine import confine
from ..toolchain.local_slots import local_work
from ..core.oserrors import one_line_failures
from .plan import PtoUnit
from .ptoas import infer_level, ptoas_argv
from ..core.safeio import read_text
from ..core.stage_seam import NO_EFFECT
from ..toolchain.compiler import VERSION_TIMEOUT_S
from .splice import find_target, function_names, preprocess, signature_of, splice, split


@one_line_failures
@local_work
def run_ptoas(unit: PtoUnit):
    """Regenerate `ptoas/<unit>.cpp` from the `.pto` (or report it cannot).

    The raw output is rewritten only when ptoas's output differs from it (after
    PyPTO's preprocessing): a first check of an unedited directory rewrites
    nothing. A raw output we did not write ourselves is backed up first. When
    ptoas cannot compile a `.pto` never seen edited, the kernels as they are
    stay the truth (`_cannot_compile`).
    """
    if unit.ptoas is None:
        if unit.allow_unapplied:
            return {NO_EFFECT: unit.pto}
        return TaskFailed(f"{unit.pto}: edited, but {unit.missing}, so the edit cannot reach the kernel files; "
                          f"install ptoas or set PTOAS_ROOT (or {say_fix('--ptoas', 'ptoas=')}), or pass "
                          f"{say_fix('--allow-unapplied-pto', 'allow_unapplied_pto=True')} to build without this edit")
    sub = Path(unit.sub_rel)
    raw = Path(unit.raw)
    seen = file_digest(unit.pto)            # the content ptoas is given (read before it runs)
    level = infer_level(read_text(unit.pto, errors="replace"))
    values = {"ptoas": unit.ptoas_key, "level": level}
    atomic.remove_stale_temps(raw)
    tmp = atomic.temp_path_for(raw, suffix=".tmp.cpp")       # ptoas may want a .cpp name
    argv = ptoas_argv(unit.ptoas, os.path.relpath(unit.pto, sub), os.path.relpath(tmp, sub), level)
    try:
        try:
            proc = procs.run(argv, cwd=sub, timeout=unit.timeout)
        except OSError as exc:
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: cannot run {unit.ptoas}: {exc}; "
                              "check --ptoas / PTOAS_ROOT")
        command = f"  command: {shlex.join(argv)}"
        if proc.timed_out:
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: timed out after {unit.timeout:g} s (killed "
                              "with every process it started; raise PYPTO_PTOAS_TIMEOUT); kernel files untouched, "
                              f"retried next run\n{command}" + (f"\n{proc.output}" if proc.output else ""))
        if proc.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            output = proc.output or f"{proc.how}, no output"
            first = output.splitlines()[0][:400]
            return _cannot_compile(unit, seen, values, first, f"{command}\n{output}", TaskFailed(
                f"ptoas rebuild failed for {unit.pto}: {first}; fix the .pto (or restore it) and rebuild — kernel "
                f"files untouched, retried next run\n{command}\n{output}"))
        new = read_text(tmp, errors="replace")
        if not function_names(new):
            return _cannot_compile(unit, seen, values, "its output defines no kernel function", command, TaskFailed(
                f"ptoas rebuild failed for {unit.pto}: the output defines no kernel function (AICORE void "
                f"<name>(...)); check ptoas (--ptoas, PTOAS_ROOT) and the .pto — {unit.raw} and kernel files "
                f"untouched\n{command}"))
        old = _read_or_none(raw)
        record = load_record(unit.record)
        if old is not None and preprocess(old) == preprocess(new):
            if record.get("pto") != seen:
                save_record(unit.record, {**record, "pto": seen})
            return {**values, "rewrote": False, "lines": [f"[pto->cpp] checked {unit.pto}: unchanged"]}
        lines = [f"[pto->cpp] regenerating from {unit.pto}"]
        if old is not None and record.get("raw") != text_digest(old):
            lines.append(f"[pto->cpp]   kept {unit.raw} as it was in {backup(unit, raw, old)}")
        if old is not None and "raw" not in record:      # first sight: kernels holding this body are not hand edits
            record["found"] = text_digest(preprocess(old))
        os.replace(tmp, raw)
        save_record(unit.record, {**record, "raw": text_digest(new), "pto": seen})
    finally:
        tmp.unlink(missing_ok=True)
    return {**values, "rewrote": True, "lines": lines}


def _cannot_compile(unit: PtoUnit, seen: str, values: dict, why: str, details: str, failure: TaskFailed):
    """ptoas ran and could not compile the `.pto` (`why`): `failure` when the file was edited since it was last
    seen; else — first sight, or the content of the last success under another ptoas — the kernels as they are
    stay the truth: a warning naming the installed ptoas and its version, the unit recorded as built with the
    raw output not rewritten (its kernels are taken as found), the `.pto` content recorded so a later edit is
    compiled again and fails if it cannot be."""
    record = load_record(unit.record)
    if record and record.get("pto") != seen:
        return failure
    version = ptoas_version(unit.ptoas)
    warning = (f"{unit.pto}: the installed ptoas ({version}: {unit.ptoas}) cannot compile this file as it stands "
               f"({why}); it was never seen edited, so the build uses the kernels as they are "
               "(PYPTO_REBUILD_FROM_PTO=0 builds from them without running ptoas; an edit of this .pto must compile)")
    save_record(unit.record, {**record, "pto": seen})
    return {**values, "rewrote": False, "rejected": unit.pto, "warning": warning,
            "lines": [f"[pto->cpp] {version} cannot compile {unit.pto}; kernels kept as they are", details]}


def ptoas_version(ptoas: str) -> str:
    """The first line of `ptoas --version` (`ptoas 0.55`), or why there is none."""
    try:
        proc = procs.run([ptoas, "--version"], timeout=VERSION_TIMEOUT_S)
    except OSError as exc:
        return f"version unknown: {exc.strerror or exc}"
    line = next((x.strip() for x in (proc.stdout or proc.stderr).splitlines() if x.strip()), "")
    if proc.returncode != 0 or not line:
        return f"version unknown: --version {proc.how}"
    return one_line(line, 120)


def _read_or_none(path: Path) -> str | None:
    try:
        return read_text(path, errors="replace")
    except FileNotFoundError:
        return None


@one_line_failures
@local_work
def run_splice(unit: PtoUnit):
    """Splice the preprocessed raw body between the sentinels of every kernel it defines."""
    raw_path = Path(unit.raw)
    if not raw_path.exists():
        return {"raw": None, "spliced": []}
    raw_state = make_state(unit.raw)
    try:
        raw = read_text(raw_path)
    except UnicodeDecodeError as exc:
        return TaskFailed(f"{unit.raw}: not UTF-8 text (byte {exc.start}); cannot splice — restore it, or edit "
                          f"{unit.pto} so ptoas regenerates it, or recompile via ir.compile()")
    try:
        edits = plan_splice(unit, raw)
    except PyptoBuildError as exc:
        return TaskFailed(str(exc))
    record = load_record(unit.record)
    bodies = dict(record.get("bodies") or {})
    lines, spliced = [], []
    body = preprocess(raw)
    for target, text, old_body, new_text in edits:
        rel = target.as_posix()
        atomic.remove_stale_temps(target)       # left by a run killed while splicing it
        if new_text != text:
            if bodies.get(rel, record.get("found")) != text_digest(old_body):
                lines.append(f"[pto->cpp]   kept your edited body of {rel} in {backup(unit, target, text)}")
            atomic.write_text(target, new_text, mode=target.stat().st_mode & 0o777)
            lines.append(f"[pto->cpp]   spliced -> {rel}")
            spliced.append(rel)
        bodies[rel] = text_digest(body)         # recorded per file: a failure keeps the rest
        save_record(unit.record, {**_seen_part(record), "raw": text_digest(raw), "bodies": bodies})
    return {"raw": raw_state, "spliced": spliced, "lines": lines}


def plan_splice(unit: PtoUnit, raw: str) -> list[tuple[Path, str, str, str]]:
    """(target, old text, old body, new text) per kernel; raises before anything is written."""
    body = preprocess(raw)
    edits = []
    for name in function_names(raw):
        found = find_target(Path(unit.sub_rel), name)
        if found is None:
            continue
        target = Path(os.path.normpath(found))
        confine(Path.cwd(), target, f"kernel file of {name} (splice target of {unit.pto})")
        try:
            text = read_text(target)
        except UnicodeDecodeError:
            raise SpliceError(f"{target}: not UTF-8 text; cannot splice — restore it or recompile via "
                              "ir.compile()") from None
        _head, old_body, _tail = split(text, target.as_posix())
        old_sig, new_sig = signature_of(old_body, name), signature_of(body, name)
        if old_sig is not None and new_sig is not None and old_sig != new_sig:
            raise SpliceError(
                f"{target}: the edit of {unit.pto} changes the signature of kernel {name} "
                f"from ({old_sig}) to ({new_sig}); the wrapper's kernel_entry no longer matches — a fresh "
                "ir.compile() is needed (kernel file left untouched)")
        edits.append((target, text, old_body, splice(text, body, target.as_posix())))
    return edits


def load_record(path: str) -> dict:
    """`{"raw": digest of the raw output we wrote or took as found, "bodies": {kernel: body digest we
    wrote or took as found}, "found": digest of the body of the raw output first found (first sight),
    "pto": digest of the .pto as last compiled, taken as found or found uncompilable (`_cannot_compile`)}`.

    Empty when none or unreadable; a record of the first format (kernel -> digest) is read as its bodies.
    """
    try:
        data = json.loads(read_text(path))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return data if {"bodies", "raw", "found", "pto"} & set(data) else {"bodies": data}


def _seen_part(record: dict) -> dict:
    """What the ptoas task keeps in a record the splice rewrites: the `.pto` content last seen."""
    return {"pto": record["pto"]} if "pto" in record else {}


def record_seen(unit: PtoUnit) -> None:
    """Record the `.pto` as seen (a unit taken as found without ptoas), so that ptoas failing on this very
    content later is not taken for a failing edit."""
    record = load_record(unit.record)
    save_record(unit.record, {**record, "pto": file_digest(unit.pto)})


def save_record(path: str, record: dict) -> None:
    atomic.write_text(Path(path), json.dumps(record, indent=1, sort_keys=True) + "\n", sweep=True)


def backup(unit: PtoUnit, target: Path, text: str) -> str:
    """Keep a hand-edited kernel file under .pypto_build/backup/ before it is overwritten."""
    when = time.strftime("%Y%m%d-%H%M%S")
    folder = Path(unit.backup_dir) / target.parent
    dest = folder / atomic.fit_name(f"{target.name}.{when}")       # a 255-byte kernel name still fits
    n = 1
    while dest.exists():
        dest = folder / atomic.fit_name(f"{target.name}.{when}.{n}")
        n += 1
    atomic.write_text(dest, text)
    return dest.as_posix()


def adopt_splice(unit: PtoUnit) -> dict:
    """First sight with the raw output as found: take the kernel files as they are (by content).

    Each kernel is recorded as holding the raw output's body (`SpliceCheck.adopted`), so a
    body that differs — a hand edit — is backed up before a later splice replaces it.
    """
    try:
        raw = read_text(Path(unit.raw))
    except (OSError, UnicodeDecodeError):
        raw = ""
    body = text_digest(preprocess(raw))
    bodies = {}
    for name in function_names(raw):
        found = find_target(Path(unit.sub_rel), name)
        if found is not None:
            bodies[Path(os.path.normpath(found)).as_posix()] = body
    return {"raw": make_state(unit.raw), "spliced": [], "adopted": True, "bodies": bodies,
            "raw_digest": text_digest(raw)}


def record_adopted(unit: PtoUnit, values: dict) -> None:
    """The splice record of a unit taken as found (called by the building run that adopts it)."""
    save_record(unit.record, {**_seen_part(load_record(unit.record)), "raw": values.get("raw_digest"),
                              "bodies": values.get("bodies") or {}})
