"""`cache/binary_context.json`: written last, atomically, in PyPTO's format."""
from __future__ import annotations

import json
from pathlib import Path

from . import atomic, safeio

STAMP = "cache/binary_context.json"


def stamp_text(stamp: dict) -> str:
    """json.dump(indent=2, sort_keys=True) plus a newline, as PyPTO writes it."""
    return json.dumps(stamp, indent=2, sort_keys=True) + "\n"


def write_stamp(path: Path, stamp: dict) -> None:
    atomic.write_text(path, stamp_text(stamp), sweep=True)


def remove_stamp(path: Path) -> None:
    Path(path).unlink(missing_ok=True)


def stamp_matches(path: Path, stamp: dict) -> bool:
    try:
        return safeio.read_text(path) == stamp_text(stamp)
    except (OSError, UnicodeDecodeError):
        return False
