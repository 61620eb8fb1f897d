"""doit actions of the `.pto` stage: run ptoas, splice its body into kernel files.

Both return their PyPTO-style progress lines in `lines` (the reporter prints
them) and never leave a torn file: ptoas writes a temp file that is renamed
onto `ptoas/<unit>.cpp`; a splice checks every target first (sentinels,
signatures), backs up hand-edited bodies, then writes each file atomically.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from doit.exceptions import TaskFailed

from . import atomic
from .checker import make_state
from .errors import PyptoBuildError, SpliceError
from .hashing import text_digest
from .layout import confine
from .oserrors import one_line_failures
from .pto_plan import PtoUnit
from .ptoas import infer_level, ptoas_argv
from .safeio import read_text
from .splice import find_target, function_names, preprocess, signature_of, splice, split


@one_line_failures
def run_ptoas(unit: PtoUnit):
    """Regenerate `ptoas/<unit>.cpp` from the `.pto` (or report it cannot)."""
    if unit.ptoas is None:
        return {"not_applied": unit.pto}
    sub = Path(unit.sub_rel)
    raw = Path(unit.raw)
    level = infer_level(read_text(unit.pto, errors="replace"))
    atomic.remove_stale_temps(raw)
    tmp = atomic.temp_path_for(raw, suffix=".tmp.cpp")       # ptoas may want a .cpp name
    argv = ptoas_argv(unit.ptoas, os.path.relpath(unit.pto, sub), os.path.relpath(tmp, sub), level)
    try:
        try:
            proc = subprocess.run(argv, cwd=sub, capture_output=True, text=True, errors="replace",
                                  timeout=unit.timeout)
        except subprocess.TimeoutExpired:
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: timed out after {unit.timeout:g} s "
                              "(raise PYPTO_PTOAS_TIMEOUT); kernel files untouched, retried next run")
        except OSError as exc:
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: cannot run {unit.ptoas}: {exc}; "
                              "check --ptoas / PTOAS_ROOT")
        command = f"  command: {' '.join(argv)}"
        if proc.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            output = (proc.stderr or proc.stdout).strip() or f"exit status {proc.returncode}, no output"
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: {output.splitlines()[0][:400]}; fix the .pto "
                              f"(or restore it) and rebuild — kernel files untouched, retried next run\n"
                              f"{command}\n{output}")
        if not function_names(read_text(tmp, errors="replace")):
            return TaskFailed(f"ptoas rebuild failed for {unit.pto}: the output defines no kernel function "
                              f"(AICORE void <name>(...)); check ptoas (--ptoas, PTOAS_ROOT) and the .pto — "
                              f"{unit.raw} and kernel files untouched\n{command}")
        os.replace(tmp, raw)
    finally:
        tmp.unlink(missing_ok=True)
    return {"ptoas": unit.ptoas_key, "level": level, "lines": [f"[pto->cpp] regenerating from {unit.pto}"]}


@one_line_failures
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
    lines, spliced = [], []
    for target, text, old_body, new_text in edits:
        rel = target.as_posix()
        atomic.remove_stale_temps(target)       # left by a run killed while splicing it
        if new_text != text:
            if record.get(rel) != text_digest(old_body):
                lines.append(f"[pto->cpp]   kept your edited body of {rel} in {backup(unit, target, text)}")
            atomic.write_text(target, new_text, mode=target.stat().st_mode & 0o777)
            lines.append(f"[pto->cpp]   spliced -> {rel}")
            spliced.append(rel)
    body = preprocess(raw)
    save_record(unit.record, {t.as_posix(): text_digest(body) for t, *_ in edits})
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
    """Body digests as last spliced, by kernel path ({} when none or unreadable)."""
    try:
        data = json.loads(read_text(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_record(path: str, bodies: dict) -> None:
    atomic.write_text(Path(path), json.dumps(bodies, indent=1, sort_keys=True) + "\n", sweep=True)


def backup(unit: PtoUnit, target: Path, text: str) -> str:
    """Keep a hand-edited kernel file under .pypto_build/backup/ before it is overwritten."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = Path(unit.backup_dir) / target.parent
    dest = folder / atomic.fit_name(f"{target.name}.{stamp}")       # a 255-byte kernel name still fits
    n = 1
    while dest.exists():
        dest = folder / atomic.fit_name(f"{target.name}.{stamp}.{n}")
        n += 1
    atomic.write_text(dest, text)
    return dest.as_posix()


def adopt_splice(unit: PtoUnit, raw_path: str, record: str) -> dict | None:
    """First sight of a unit: accept the kernel files as ir.compile() (or the user) left them.

    Adopted when every kernel the raw output defines already holds its body, or
    is at least as new as the raw output (PyPTO's mtime rule, used only once).
    Records the current bodies so a later splice can tell hand edits apart.
    """
    try:
        raw = read_text(raw_path)
        raw_mtime = os.stat(raw_path).st_mtime
        body = preprocess(raw)
        bodies = {}
        for name in function_names(raw):
            found = find_target(Path(unit.sub_rel), name)
            if found is None:
                continue
            target = Path(os.path.normpath(found))
            text = read_text(target)
            old_body = split(text, target.as_posix())[1]
            if old_body != body and os.stat(target).st_mtime < raw_mtime:
                return None
            bodies[target.as_posix()] = text_digest(old_body)
        save_record(record, bodies)
    except (OSError, UnicodeDecodeError, PyptoBuildError):
        return None                 # not adopted: the splice runs and reports what is wrong
    return {"raw": make_state(raw_path), "spliced": [], "adopted": True}
