"""`.pypto_build/`: where pypto_build keeps its own state inside a build directory.

PyPTO never reads it. Each platform's build state (its doit database — sqlite: of doit's
stock backends the only one that survived concurrent runs and kill -9 when measured — and
header-set records) has a folder of its own, as its binaries are kept apart: switching
platforms and back finds each one's state as it left it. Before, one database sat
in STATE_DIR itself (the legacy place, taken over by the first run that keeps
state per platform). Names only: nothing here reads or writes a file.
"""
from __future__ import annotations

import os

STATE_DIR = ".pypto_build"
STATE_DB = "state.sqlite3"
PLATFORM_STATES = f"{STATE_DIR}/state"
GOLDEN = "golden"           # STATE_DIR/golden/: golden.py's kept result (run/golden_cache.py)
REPLAY = "replay"           # STATE_DIR/replay/: the last run's output tensors (run/execution.py)
HISTORY = "history.json"    # STATE_DIR/history.json: the variants its verdicts ran (variants/history.py)
VARIANT_UNITS = "variants"  # STATE_DIR/variants/<id>.json: each kept variant's units (variants/history.py)
BACKUP = "backup"           # STATE_DIR/backup/: hand-edited kernel bodies kept before a .pto splice


def state_folder(platform: str) -> str:
    """The folder of `platform`'s build state, relative to the build root."""
    return f"{PLATFORM_STATES}/{platform}"


def current_state_folder(root: str | os.PathLike[str], platform: str) -> str:
    """Where `platform`'s build state is read from (relative to `root`): its own folder, unless only the one
    state of before is there (a reader sees what a build would take over)."""
    own = state_folder(platform)
    legacy = os.path.join(root, STATE_DIR, STATE_DB)
    if not os.path.lexists(os.path.join(root, own, STATE_DB)) and os.path.lexists(legacy):
        return STATE_DIR
    return own
