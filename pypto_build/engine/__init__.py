"""doit as the engine: loading a graph as tasks, its commands, dependency state, reports.

Door: `BuildDirLoader` / `BuildDirMain` / `BuildDirRun` (a build directory as doit
tasks and commands; `DOIT_ONLY`: doit's `run` options a build has no word for), `run_build` (a build's own run: doit's `run` command with the values
a build gives it), `BuildReporter`, `explain` / `format_lines`, `write_trace`,
`dir_lock` (one run per directory), `sigterm_as_interrupt`,
and `open_state` (a platform's doit state). Modules: `loader`, `tasks` (the
stages it is given -> task dicts), `session`, `commands`, `shown`, `depstate`, `statedb`, `sqlitedb`,
`file_checker`, `reporter`, `explanation`, `workers`, `lock`, `trace`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "BuildDirLoader": "loader",
    "BuildDirMain": "commands",
    "BuildDirRun": "commands",
    "DOIT_ONLY": "commands",
    "run_build": "commands",
    "BuildReporter": "reporter",
    "explain": "explanation",
    "format_lines": "explanation",
    "write_trace": "trace",
    "dir_lock": "lock",
    "sigterm_as_interrupt": "lock",
    "open_state": "statedb",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
