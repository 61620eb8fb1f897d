"""Atomic file writes: a temp file in the same directory, then os.replace.

A reader sees either the old file or the new one, never a torn one; a crash
leaves at most a `*.tmp` file that the next write of the same target removes
(its name carries the target name and is unique per writer).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def temp_path_for(target: Path, suffix: str = ".tmp") -> Path:
    """A fresh, unique (empty, created) temp path next to `target`."""
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    return Path(name)


def write_bytes(target: Path, data: bytes, *, mode: int = 0o644, sweep: bool = False) -> None:
    """Write `data` to `target` atomically (same-directory temp + os.replace).

    `sweep`: first remove the temp files a killed writer of `target` left — only
    for the one writer that owns `target` (a task under the directory lock).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if sweep:
        remove_stale_temps(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, mode)
        os.replace(name, target)
    except BaseException:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
        raise


def write_text(target: Path, text: str, *, mode: int = 0o644, sweep: bool = False) -> None:
    """Write `text` (UTF-8) to `target` atomically (`sweep` as for `write_bytes`)."""
    write_bytes(target, text.encode("utf-8"), mode=mode, sweep=sweep)


def replace_into(tmp: Path, target: Path) -> None:
    """Move a finished temp file onto `target` atomically (same filesystem)."""
    os.replace(tmp, target)


def remove_stale_temps(target: Path) -> int:
    """Remove temp files an interrupted writer of `target` left (`.<name>.*.tmp*`); returns how many.

    Only called under the directory lock, by the one task that owns `target`.
    """
    target = Path(target)
    removed = 0
    for stale in target.parent.glob(f".{target.name}.*.tmp*"):
        try:
            stale.unlink()
            removed += 1
        except OSError:
            pass
    return removed
