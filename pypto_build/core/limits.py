"""Size limit on the metadata files read whole into memory (documented in docs/guide.md).

`kernel_config.py`, `compiled_meta.json` and `distributed_meta.json` are small
(a few hundred bytes per kernel or parameter): a file past the limit is a
mistake (a log or a binary copied over it), refused before it is parsed.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import TooLarge
from .safeio import open_regular

MAX_METADATA_BYTES = 16 * 2**20


def read_capped(path: Path, limit: int = MAX_METADATA_BYTES) -> bytes:
    """The bytes of `path`; `TooLarge` when it holds more than `limit` bytes. OSError as `open` raises it
    (`safeio.NotRegularFile` for a FIFO or device: never read)."""
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise TooLarge(f"is {max(size, len(data)) / 2**20:.1f} MiB, over the {limit / 2**20:g} MiB limit "
                       "for metadata files")
    return data
