"""doit as the engine: loading a graph as tasks, its commands, dependency state, reports.

Door: `BuildDirLoader` / `BuildDirMain` (a build directory as doit tasks and
commands), `BuildReporter`, `explain` / `format_lines`, `write_trace`,
`exit_now`, `dir_lock` (one run per directory), `open_state` (its doit state), and `noop` (the no-op record, offered whole: it is read before doit
loads). Modules: `loader`, `tasks` (graph -> task dicts), `commands`, `depstate`, `statedb`, `file_checker`,
`reporter`, `explanation`, `workers`, `lock`, `noop`, `trace`.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
    "BuildDirLoader": "loader",
    "BuildDirMain": "commands",
    "BuildReporter": "reporter",
    "explain": "explanation",
    "format_lines": "explanation",
    "write_trace": "trace",
    "exit_now": "workers",
    "dir_lock": "lock",
    "open_state": "statedb",
}
_MODULES = ('noop',)

__all__ = [*_EXPORTS, *_MODULES]
__getattr__ = door(__name__, _EXPORTS, _MODULES)
