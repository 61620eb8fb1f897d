"""`pypto-build cache stats [DIR] | clean`: the artefact cache, the precompiled preludes, the kept variants' store,
and a build directory's own state (`state_report`)."""
from __future__ import annotations

import argparse
import os

from ..errors import UserError


def cache_verb(args: argparse.Namespace) -> int:
    """The artefact cache (when one is configured) and the store of precompiled preludes beside it; with
    `stats`, then what DIR's `.pypto_build/` holds (DIR, else the build directory the working directory is in)."""
    from ..cache import ArtifactCache, PreludeStore, human_size, prelude_store_dir
    from ..core.settings import cache_folder
    from ..variants.store import VariantStore, store_dir
    from .state_report import state_lines, state_root
    if args.action == "clean" and args.dir is not None:
        raise UserError(f"cache clean takes no DIR ({args.dir}): it empties the artefact cache, the precompiled "
                        "preludes and the kept variants; a directory's state is its .pypto_build/ (`cache stats "
                        "DIR` shows it)")
    where = cache_folder(args.cache_dir)        # a file: one line
    if where is not None and not os.path.isdir(os.path.expanduser(where)):     # a typo: reported, never made
        raise UserError(f"no cache at {where}: nothing was ever stored there; check the path (--cache-dir, "
                        f"$PYPTO_BUILD_CACHE), or build with --cache-dir {where} to make it")
    root = state_root(args.dir) if args.action == "stats" else None    # a bad DIR: one line, before any output
    cache = ArtifactCache.from_env(where)
    store = PreludeStore(prelude_store_dir(os.path.abspath(cache.directory) if cache else None))
    variants = VariantStore(store_dir(os.path.abspath(cache.directory) if cache else None))
    if cache is None:
        print("pypto-build: no artefact cache configured (--cache-dir DIR or PYPTO_BUILD_CACHE)")
    if args.action == "clean":
        if cache is not None:
            print(f"pypto-build: removed {human_size(cache.clean())} from {cache.directory}")
        print(f"pypto-build: removed {human_size(store.clean())} of precompiled preludes from {store.directory}")
        print(f"pypto-build: removed {human_size(variants.cache.clean())} of kept variants' binaries and sources "
              f"from {variants.cache.directory}")
        return 0
    if cache is not None:
        print(cache.stats().summary(cache.directory))
    entries, size = store.usage()
    print(f"precompiled preludes {store.directory}: {entries} ({human_size(size)}), limit {human_size(store.max_bytes)}")
    kept = variants.cache.stats()
    print(f"kept variants {variants.cache.directory}: {kept.binaries} binaries and sources "
          f"({human_size(kept.binary_bytes)}), limit {human_size(kept.max_bytes)}; {kept.evicted} evicted")
    if root is not None:
        print(f"build directory {root}:")
        for line in state_lines(root):
            print(line)
    return 0
