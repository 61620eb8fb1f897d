"""`main(argv, ...)`: the command line behind `debug/run.py` (PyPTO's `replay._main`).

Same flags as `pypto-build replay` (the option table of options.py). Input
selection, as PyPTO's: when `debug/run.py` passes
its inline inputs and validation is not in effect with a golden.py present,
the inline inputs are used, nothing is validated and `user_compare(*tensors)`
is called; otherwise the inputs come from `golden.generate_inputs()` and are
validated per `--validate`. Also runnable as `python -m pypto_build.compat.runner_main DIR`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from .. import options
from ..builddir.markers import DEBUG_RUNNER, GOLDEN_PY
from ..errors import OK, UserError, ValidationFailed

__all__ = ["main", "make_parser"]

_PROG = "pypto_build.compat.runner_main"


def make_parser(*, prog: str = _PROG, validate_default: bool = False) -> argparse.ArgumentParser:
    """The replay parser: a positional work_dir, `pypto-build replay`'s flags, `--validate/--no-validate`."""
    p = argparse.ArgumentParser(
        prog=prog, description="Build what changed (content-keyed), run the build directory on the platform it "
                               "records (or --platform's) and optionally validate against golden.py (PyPTO's "
                               "replay CLI, same flags).")
    p.add_argument("work_dir", type=Path, metavar="WORK_DIR",
                   help="the build directory (debug/run.py passes its parent directory itself)" if validate_default
                   else "build_output/<jit_dir>/ directory")
    options.add_to_parser(p, (*options.BUILD, *options.RUN))
    p.add_argument("--validate", action=argparse.BooleanOptionalAction, default=validate_default,
                   help="compare outputs with golden.py::compute_golden (RTOL/ATOL); default "
                        f"{'on (debug/run.py)' if validate_default else 'off'}")
    return p


def main(argv: Sequence[str] | None = None, *, inline_inputs: Callable[[], Sequence] | None = None,
         user_compare: Callable[..., object] | None = None) -> int:
    """Parse `argv` (work_dir first), replay, validate or call `user_compare`; return the exit status.

    Inputs from golden.py: exactly `pypto-build replay [--validate] WORK_DIR` (verbs.py), golden.py and the
    program running in a child process. Inline inputs: `replay(work_dir, *tensors)`, then `user_compare`.
    The exit status and the lines are every front end's (exits.py): 0 on success; 1 when a unit, the run or
    the validation fails (`user_compare` raising AssertionError); 2 for bad input; errors go to stderr.
    """
    from ..core.exits import guarded
    from ..verbs import run_verb

    parser = make_parser(prog=DEBUG_RUNNER if inline_inputs is not None else _PROG,
                         validate_default=inline_inputs is not None)
    args = parser.parse_args(options.normalize_argv(list(sys.argv[1:] if argv is None else argv)))
    work_dir = args.work_dir.resolve()
    if inline_inputs is None or (args.validate and (work_dir / GOLDEN_PY).is_file()):
        return guarded(lambda: run_verb("replay", args, work_dir))
    return guarded(lambda: _inline(work_dir, args, inline_inputs, user_compare))


def _inline(work_dir: Path, args: argparse.Namespace, inline_inputs: Callable[[], Sequence],
            user_compare: Callable[..., object] | None) -> int:
    """debug/run.py's inline inputs: replay on them (no validation), then the user's compare hook."""
    from .pypto_replay import replay

    tensors = list(inline_inputs())
    missing = [i for i, t in enumerate(tensors) if t is None]
    if missing:
        raise UserError(f"inline input(s) {missing} are None (scalar parameters): set their values in "
                        "_inline_inputs() of debug/run.py")
    if args.log_sync_pypto and not args.quiet:
        print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
    run = options.run_spec(args)
    replay(work_dir, *tensors, config=run.config, recompile=args.recompile,
           rebuild_from_pto=not args.no_rebuild_from_pto, jobs=args.jobs, progress=sys.stdout,
           run_timeout=run.timeout, allow_unapplied_pto=args.allow_unapplied_pto, quiet=args.quiet)
    if user_compare is not None:
        try:
            user_compare(*tensors)
        except AssertionError as exc:       # the user's comparison said no: a failed validation
            raise ValidationFailed(f"_user_compare in debug/run.py failed: {exc or 'AssertionError'}") from exc
    return OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
