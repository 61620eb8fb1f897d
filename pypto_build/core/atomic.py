"""Atomic file writes: a temp file in the same directory, then os.replace.

A reader sees either the old file or the new one, never a torn one; a crash
leaves at most a temp file that the next write of the same target removes:
its name is `.<target name>.<8 random chars><suffix>`, or, when that would not
fit in a file name (255 bytes), `.<cut name>~<digest of the name>.<8 random
chars><suffix>` — still derived from the target alone, so the sweep finds it.
A failed write raises OSError naming the target (not the temp file).
"""
from __future__ import annotations

import filecmp
import os
import re
from pathlib import Path

NAME_MAX = 255                                   # bytes per file name on Linux filesystems
SUFFIXES = (".tmp", ".d.tmp", ".tmp.cpp", ".tmp.o", ".manifest.tmp")     # every temp suffix our writers use
_ROOM = 1 + 1 + 8 + max(map(len, SUFFIXES))     # ".", ".", the random part and the longest suffix
_DIGEST = 16                                     # hex digits of the full name kept in a cut prefix
# The random part: ours (hex) or tempfile.mkstemp's (older runs' leftovers); then one of our suffixes.
_TEMP_RE = re.compile(r"[a-z0-9_]{8}(?:" + "|".join(re.escape(s) for s in SUFFIXES) + ")")


def fit_name(name: str, room: int = 0) -> str:
    """`name` if it and `room` more bytes fit in a file name, else a cut of it + `~` + a digest of all of it."""
    raw = name.encode("utf-8", "surrogateescape")
    if len(raw) + room <= NAME_MAX:
        return name
    import hashlib
    digest = hashlib.blake2s(raw, digest_size=_DIGEST // 2).hexdigest()
    cut = raw[: NAME_MAX - room - 1 - _DIGEST].decode("utf-8", "ignore")    # never half a character
    return f"{cut}~{digest}"


def temp_prefix(target: Path) -> str:
    """The start of every temp file name of `target` (see the module docstring)."""
    return f".{fit_name(Path(target).name, _ROOM)}."


def create_temp(target: Path, suffix: str) -> tuple[int, str]:
    """A fresh temp file of `target` (see the module docstring), opened: (fd, path)."""
    if suffix not in SUFFIXES:
        raise ValueError(f"temp suffix {suffix!r} is not one of {SUFFIXES} (the sweep would miss it)")
    prefix = os.path.join(os.fspath(target.parent), temp_prefix(target))
    while True:
        name = f"{prefix}{os.urandom(4).hex()}{suffix}"
        try:
            return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), name
        except FileExistsError:
            continue
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, os.fspath(target)) from None


def temp_path_for(target: Path, suffix: str = ".tmp") -> Path:
    """A fresh, unique (empty, created) temp path next to `target`."""
    fd, name = create_temp(Path(target), suffix)
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
    fd, name = create_temp(target, ".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, mode)
        os.replace(name, target)
    except BaseException as exc:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, os.fspath(target)) from None
        raise


def write_text(target: Path, text: str, *, mode: int = 0o644, sweep: bool = False) -> None:
    """Write `text` (UTF-8) to `target` atomically (`sweep` as for `write_bytes`)."""
    write_bytes(target, text.encode("utf-8"), mode=mode, sweep=sweep)


def install(tmp: Path, target: Path) -> bool:
    """Move a finished temp file onto `target`, unless `target` already holds exactly these bytes: then the
    temp goes and `target` is left as it was (another tool's identical binary keeps its file). True: moved."""
    try:
        same = os.path.isfile(target) and not os.path.islink(target) and filecmp.cmp(tmp, target, shallow=False)
    except OSError:
        same = False
    if same:
        os.unlink(tmp)
        return False
    os.replace(tmp, target)
    return True


def is_temp_of(target: Path, name: str) -> bool:
    """Whether the file name `name` is a temp file of `target`."""
    prefix = temp_prefix(target)
    return name.startswith(prefix) and _TEMP_RE.fullmatch(name, len(prefix)) is not None


def remove_stale_temps(target: Path) -> int:
    """Remove temp files an interrupted writer of `target` left; returns how many.

    Only called under the directory lock, by the one task that owns `target`.
    """
    target = Path(target)
    try:
        names = os.listdir(target.parent)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if is_temp_of(target, name):
            try:
                os.unlink(target.parent / name)
                removed += 1
            except OSError:
                pass
    return removed
