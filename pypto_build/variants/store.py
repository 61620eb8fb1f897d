"""The store of the kept variants' binaries and sources: by content, per user, bounded, least recently used first out.

Beside the artefact cache (`<cache dir>/variants` with `--cache-dir` / `$PYPTO_BUILD_CACHE`), else
`$XDG_CACHE_HOME/pypto_build/variants` (by default `~/.cache/pypto_build/variants`), whether or not a cache is
configured: a variant recorded today can be run again after the directory's binaries were rebuilt. Each entry is
a file's content under its own xxh3-128 digest (the digest a variant records), in the artefact cache's own format
(`cache.ArtifactCache`: atomic writes, checked on every read, a corrupt entry dropped): one copy across variants
and directories. Its size limit is `$PYPTO_BUILD_VARIANTS_SIZE` (default 2G); past it the entries used least
recently go first, so a variant's binary may be gone: `pypto-build bisect` then rebuilds it from its kept source.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable, Mapping

from ..cache import ArtifactCache
from ..core.settings import variants_size

FOLDER = "variants"


def store_dir(cache_dir: str | None, env: Mapping[str, str] | None = None) -> str:
    """Where this user's kept variants live: beside the artefact cache (`cache_dir`), else the user's cache folder."""
    if cache_dir:
        return os.path.join(os.path.abspath(os.path.expanduser(cache_dir)), FOLDER)
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "pypto_build", FOLDER)


class VariantStore:
    """The store at `directory`: `add` files by their digests, `restore` one by its digest."""

    def __init__(self, directory: str | Path, env: Mapping[str, str] | None = None) -> None:
        self.cache = ArtifactCache(Path(directory), max_bytes=variants_size(env))

    def add(self, files: Iterable[tuple[str, Path]]) -> None:
        """Store each (digest, file) not stored yet; one stored already only becomes the most recently used."""
        for digest, path in files:
            entry = self.cache.entry_path(digest)
            try:
                os.utime(entry)                  # there already: used now
            except FileNotFoundError:
                with contextlib.suppress(FileNotFoundError):     # gone since it was digested: nothing to keep
                    self.cache.put(digest, path)
            except OSError:
                self.cache.put(digest, path)

    def restore(self, digest: str, dest: Path) -> bool:
        """Write the file kept as `digest` onto `dest` (atomically, checked against `digest` itself); False when it
        is not kept (evicted) or what is kept is not that content (a file changed while it was stored)."""
        from ..core.hashing import file_digest

        if not self.cache.get(digest, Path(dest), count=False):
            return False
        if file_digest(str(dest)) == digest:
            return True
        Path(dest).unlink()
        return False

    def read(self, digest: str) -> bytes | None:
        """The bytes kept as `digest` (a source, for a diff), checked; None when not kept."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="pypto-build-variant-") as tmp:
            dest = Path(tmp) / "file"
            return dest.read_bytes() if self.restore(digest, dest) else None
