"""The names of PyPTO's build directory layout, and the files that make a directory one (PyPTO's marker rules).

Every module names PyPTO's files and folders through these constants. Reads names only (no file content):
`present_markers`, `next_level_names`, `is_build_dir`. Where a directory is classified by them:
`layout.classify`; finding the build directory a path is in: `layout.find_root`.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import LayoutError
from ..core.safeio import refusal

KERNEL_CONFIG = "kernel_config.py"
COMPILED_META = "compiled_meta.json"
DISTRIBUTED_META = "distributed_meta.json"
ORCHESTRATION_DIR = "orchestration"         # the orchestration sources (and an L3 build's host driver)
HOST_ORCH = f"{ORCHESTRATION_DIR}/host_orch.py"
MARKERS = (COMPILED_META, DISTRIBUTED_META, KERNEL_CONFIG, HOST_ORCH)
KERNELS_DIR = "kernels"                     # kernels/<core>/<name>.cpp
NEXT_LEVELS = "next_levels"                 # the sub-builds of an L3 or multi-orch build: next_levels/<name>/
GOLDEN_PY = "golden.py"                     # the program's inputs and expected outputs
PTOAS_DIR = "ptoas"                         # the .pto stage: ptoas/<unit>.pto and ptoas' raw .cpp
CACHE_DIR = "cache"                         # what PyPTO places for the runtime: the stamp, payloads
STAMP_FILE = f"{CACHE_DIR}/binary_context.json"     # the sub-build's stamp (builddir/stamp.py)
STAMP_LOCK = ".binary_context.lock"         # beside it: held for a whole compile-and-stamp transaction
DEBUG_DIR = "debug"
DEBUG_RUNNER = f"{DEBUG_DIR}/run.py"        # PyPTO's debug runner (compat/runner.py writes ours)
DFX_OUTPUTS = "dfx_outputs"                 # what a run writes: swimlanes, args_dump/, L3 dispatch folders
ARGS_DUMP_DIR = "args_dump"                 # under dfx_outputs/
ARGS_DUMP_MANIFEST = "args_dump.json"       # in args_dump/: simpler's manifest of the dumped arguments
ARGS_DUMP_BIN = "args.bin"                  # in args_dump/: their payloads
SWIMLANE_PREFIX = "merged_swimlane_"        # dfx_outputs/merged_swimlane_<time>.json: a run's task timeline
DISPATCH_PROGRAM = "dispatch_program.json"  # which chip program an L3 dispatch folder belongs to
# the compiler's other outputs, generated like the binaries (golden.py reads none of them)
PTOAS_PASSES_DIR, PASSES_DUMP_DIR, REPORT_DIR = "ptoas_passes", "passes_dump", "report"


def present_markers(root: Path) -> tuple[str, ...]:
    """The marker files of `root`; a directory, FIFO, socket or device under a marker's name is refused (never
    read)."""
    found = []
    for m in MARKERS:
        try:
            st = os.stat(root / m)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append(m)
        elif stat.S_ISDIR(st.st_mode):
            raise LayoutError(f"{root / m}: is a directory, not a file; remove it and restore the {m} ir.compile() "
                              "wrote (or recompile via ir.compile())")
        else:
            raise LayoutError(refusal(root / m, st.st_mode, "replace it with the file ir.compile() wrote (or "
                                                            "recompile via ir.compile())"))
    return tuple(found)


def next_level_names(root: Path) -> list[str]:
    """`next_levels/<name>` entries with a kernel_config.py, sorted."""
    base = root / NEXT_LEVELS
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / KERNEL_CONFIG).is_file())


def is_build_dir(path: Path) -> bool:
    """Whether `path` holds a marker file or next_levels/*/kernel_config.py."""
    return bool(present_markers(path)) or bool(next_level_names(path))
