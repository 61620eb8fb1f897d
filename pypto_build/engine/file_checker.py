"""The doit file checker: `filestate`'s content rules plugged into doit (`check_file_uptodate`).

Given to doit as a class (`BuildDirLoader.load_doit_config`, `statedb.open_state`), never registered
in doit's table of checkers by name. The class name is stored by doit per task; keep it stable.
"""
from __future__ import annotations

import os

from doit.dependency import FileChangedChecker

from ..core.filestate import is_modified, make_state, refreshed


class XXHChecker(FileChangedChecker):
    """Content checker plugged into doit (`check_file_uptodate`)."""

    CheckerError = OSError

    def check_modified(self, file_path, file_stat, state):
        return is_modified(file_path, file_stat, state)

    def get_state(self, dep, current_state):
        st = os.stat(dep)
        if current_state and not is_modified(dep, st, current_state):
            return refreshed(dep, st, current_state)
        return make_state(dep, st)

