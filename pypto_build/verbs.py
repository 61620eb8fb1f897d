"""build / replay / validate / explain with parsed options: one behaviour for every front end.

`pypto-build <verb>` (cli/main.py), `doit replay|pypto-build|pypto-validate|pypto-watch`
(cli/doit_plugins.py) and debug/run.py (compat/runner_main.py) call `run_verb()` with the values of the
same option table (options.py): the values become one `options.Request`, which the one pipeline runs
(pipeline.py). It sits a layer below cli and compat: both call it, and compat imports nothing of cli. So
they accept the same options, print the same lines and return the same exit status, the result's
(`BuildResult.status`; what stops a run: exits.py): 0 success, 1 a unit or a validation failed (or a
`.pto` edit was not applied, or a validation was skipped: not validated), 2 bad input or environment
(one line), 130 interrupted.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import options
from . import pipeline
from .core import stages
from .errors import OK, UserError
from .builddir.layout import find_root
from .builddir.markers import GOLDEN_PY
from .options import Request


def run_verb(verb: str, values: Any, directory: Path | str, tasks: list[str] | None = None, **fields: Any) -> int:
    """Do `verb` on the build directory containing `directory` (found as git finds its root); `fields`: what the
    front end adds to the request (`pypto-build doit run`: doit's own options, `Request.doit`)."""
    request = options.request(values, tasks=tasks or (), **fields)
    root = find_root(Path(directory))
    if verb == "explain" or (verb == "build" and options.option_value(values, "dry_run", False)):
        return explain_verb(request, root, all_tasks=bool(options.option_value(values, "all", False)))
    if verb == "build":
        return _status(pipeline.run(root, request, progress=sys.stdout, check=False), request.quiet)
    return _run_golden(verb, values, root, request)


def _run_golden(verb: str, values: Any, root: Path, request: Request) -> int:
    """replay (with --validate: a fresh verdict, recorded) or validate (the last verdict while it holds)."""
    from .run import runnable

    graph = request.plan(root)          # planned once: the run goes on this graph, which says what can run
    root = runnable(graph).path
    if not (root / GOLDEN_PY).is_file():
        raise UserError(f"{root / GOLDEN_PY} not found; the CLI takes its inputs from golden.py — add one "
                        "(generate_inputs/compute_golden) or call pypto_build.replay(dir, *tensors) from Python")
    if options.option_value(values, "log_sync_pypto", False) and not request.quiet:
        print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
    validating = verb == "validate" or bool(options.option_value(values, "validate", False))
    request = replace(request, tasks=(stages.VALIDATE if validating else stages.REPLAY,),
                      force=(stages.prefix(stages.VALIDATE),) if verb == "replay" and validating else ())
    return _status(pipeline.run(root, request, graph=graph, progress=sys.stdout, check=False), request.quiet)


def _status(result: pipeline.BuildResult, quiet: bool) -> int:
    """The result's status (0 only when everything asked for was done: a skipped validation, `doit ignore`, is
    no verdict, 1), after the lines that say why it is not 0."""
    if result.failures and quiet:       # the reporter said nothing: one line per failed unit, as without -q
        for u in result.failures:
            print(f"pypto-build: FAILED {u.task}: {u.headline}", file=sys.stderr)
    if not result.failures:             # a failure already says why nothing was compared
        for line in result.why_not_validated():
            print(f"pypto-build: NOT VALIDATED {line}", file=sys.stderr)
    return result.status


def explain_verb(request: Request, root: Path, *, all_tasks: bool = False) -> int:
    """`explain` / `build --dry-run`: every stale unit and why (with --recompile: what it would force)."""
    from .engine import explain, format_lines
    from .compile.stage import no_preludes_line

    units = list(request.tasks)
    # no preludes planned: explain opens no store (what a kernel last compiled with is in its state), so
    # reading every kernel's first lines for them would be for nothing
    graph = replace(request, preludes=False).plan(root)
    items = explain(graph, units or None, recompile=request.recompile)
    lines = format_lines(items, all_tasks=all_tasks or bool(units))
    note = no_preludes_line(graph, items) if all_tasks else None
    for line in lines[:-1] + ([note] if note else []) + lines[-1:]:
        print(line)
    return OK
