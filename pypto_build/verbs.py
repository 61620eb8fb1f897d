"""build / replay / validate / explain with parsed options: one behaviour for every front end.

`pypto-build <verb>` (cli.py) and `doit replay|pypto-build|pypto-validate|pypto-watch` (doit_plugins.py)
both call `run_verb()` with the values of the same option table (options.py),
so they accept the same options, print the same lines and return the same exit
status: 0 success, 1 a unit or a validation failed (or a `.pto` edit was not
applied, or a validation was skipped: not validated), 2 bad input or environment
(one line), 130 interrupted.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from . import options, stages
from .errors import BuildError, PyptoBuildError, WorkerDied, error, interrupted
from .markers import find_root


def guarded(call: Callable[[], int], *, debug: bool = False) -> int:
    """Run a verb: bad input is one line and exit 2, an interrupt exit 130. `debug` adds the traceback
    before that line and changes nothing else (the exit status is the same)."""
    try:
        return call()
    except BuildError as exc:
        if debug:
            _traceback()
        print(f"pypto-build: {exc}", file=sys.stderr)
        return 1
    except (PyptoBuildError, OSError) as exc:
        if debug:
            _traceback()
        from .oserrors import describe
        error(describe(exc) if isinstance(exc, OSError) else exc)
        if isinstance(exc, WorkerDied):     # as after an interrupt: skip multiprocessing's exit-time joins
            from .engine import exit_now
            exit_now(2)
        return 2
    except KeyboardInterrupt:
        interrupted()
        from .engine import exit_now
        exit_now(130)


def _traceback() -> None:
    import traceback
    traceback.print_exc()


def run_verb(verb: str, values: Any, directory: Path | str, tasks: list[str] | None = None) -> int:
    """Do `verb` on the build directory containing `directory` (found as git finds its root)."""
    options.judge(values)
    root = find_root(Path(directory))
    get = (lambda name, default=None: options._get(values, name, default))
    if verb == "explain" or (verb == "build" and get("dry_run", False)):
        return explain_verb(values, root, tasks or [], all_tasks=bool(get("all", False)))
    quiet = bool(get("quiet", False))      # -q: only errors, verdicts and .pto edits not applied
    if verb == "build":
        from .api import build
        result = build(root, tasks=tasks or None, progress=sys.stdout, check=False, quiet=quiet,
                       **options.graph_options(values), **options.cache_options(values), **options.run_options(values))
        return _status(result, quiet)
    return _run_golden(verb, values, root, quiet)


def _run_golden(verb: str, values: Any, root: Path, quiet: bool) -> int:
    """replay (with --validate: a fresh verdict, recorded) or validate (the last verdict while it holds)."""
    from .api import run_graph
    from .cache import open_caches
    from .graph import load_graph
    from .run import check_replayable

    get = (lambda name, default=None: options._get(values, name, default))
    run = options.run_spec(values)
    root = check_replayable(root)
    if not (root / "golden.py").is_file():
        raise PyptoBuildError(f"{root / 'golden.py'} not found; the CLI takes its inputs from golden.py — add one "
                              "(generate_inputs/compute_golden) or call pypto_build.replay(dir, *tensors) from Python")
    if get("log_sync_pypto", False) and not quiet:
        print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
    validating = verb == "validate" or bool(get("validate", False))
    graph = load_graph(root, **options.graph_options(values))
    result = run_graph(graph, caches=open_caches(**options.cache_options(values)), run=run,
                       tasks=[stages.VALIDATE if validating else stages.REPLAY], progress=sys.stdout, check=False,
                       force=(stages.prefix(stages.VALIDATE),) if verb == "replay" and validating else (),
                       quiet=quiet, **options.run_options(values))
    return _status(result, quiet)


def _status(result, quiet: bool) -> int:
    """0 only when everything asked for was done: a skipped validation (`doit ignore`) is no verdict, exit 1."""
    if result.failures and quiet:       # the reporter said nothing: one line per failed unit, as without -q
        for u in result.failures:
            print(f"pypto-build: FAILED {u.task}: {u.headline}", file=sys.stderr)
    if not result.failures:             # a failure already says why nothing was compared
        for line in result.why_not_validated():
            print(f"pypto-build: NOT VALIDATED {line}", file=sys.stderr)
    return 0 if result.ok and not result.failures else 1


def explain_verb(values: Any, root: Path, units: list[str], *, all_tasks: bool = False) -> int:
    """`explain` / `build --dry-run`: every stale unit and why (with --recompile: what it would force)."""
    from .engine import explain, format_lines
    from .graph import load_graph

    graph = load_graph(root, **options.graph_options(values))
    items = explain(graph, units or None, recompile=bool(options._get(values, "recompile", False)))
    for line in format_lines(items, all_tasks=all_tasks or bool(units)):
        print(line)
    return 0
