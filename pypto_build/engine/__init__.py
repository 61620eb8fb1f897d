"""doit as the engine: loading a graph as tasks, its commands, dependency state, reports.

Door: `BuildDirLoader` / `BuildDirMain` (a build directory as doit tasks and
commands), `run_build` (a build's own run: doit's task control and runner
without its command layer), `BuildReporter`, `explain` / `format_lines`,
`write_trace`, `dir_lock` (one run per directory), `sigterm_as_interrupt`, `open_state` (a platform's
doit state), `own_process` (`pypto-build` itself: deferred standard modules), and `noop` (the no-op record, offered whole: it is read before doit
loads). Modules: `loader`, `tasks` (graph -> task dicts), `session`, `commands`,
`doit_core`, `depstate`, `statedb`, `file_checker`,
`reporter`, `explanation`, `workers`, `lock`, `noop`, `trace`.
"""
from __future__ import annotations

from ..doors import door
from .doit_core import use_core

_EXPORTS = {
    "BuildDirLoader": "loader",
    "BuildDirMain": "commands",
    "run_build": "session",
    "BuildReporter": "reporter",
    "explain": "explanation",
    "format_lines": "explanation",
    "write_trace": "trace",
    "dir_lock": "lock",
    "sigterm_as_interrupt": "lock",
    "open_state": "statedb",
    "own_process": "doit_core",
}
_MODULES = ('noop',)

__all__ = [*_EXPORTS, *_MODULES]
_open = door(__name__, _EXPORTS, _MODULES)


def __getattr__(name: str):
    if name in _EXPORTS and name != "own_process":     # what loads doit: its engine modules only (doit_core.py)
        use_core()
    return _open(name)
