"""`main(argv, ...)`: the command line behind `debug/run.py` (PyPTO's `replay._main`, reference §8.2).

Same flags as `pypto-build replay` (taken from `cli._replay_flags`), running
`pypto_build.replay.replay`. Input selection (§8.2): when `debug/run.py` passes
its inline inputs and validation is not in effect with a golden.py present,
the inline inputs are used, nothing is validated and `user_compare(*tensors)`
is called; otherwise the inputs come from `golden.generate_inputs()` and are
validated per `--validate`. Also runnable as `python -m pypto_build.replay_main DIR`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from .cli import _replay_flags
from .errors import BuildError, PyptoBuildError

__all__ = ["main", "make_parser"]

_PROG = "pypto_build.replay_main"


def make_parser(*, prog: str = _PROG, validate_default: bool = False) -> argparse.ArgumentParser:
    """The replay parser: a positional work_dir, `pypto-build replay`'s flags, `--validate/--no-validate`."""
    p = argparse.ArgumentParser(
        prog=prog, description="Build what changed (content-keyed), run the build directory on the host runtime "
                               "and optionally validate against golden.py (PyPTO's replay CLI, same flags).")
    p.add_argument("work_dir", type=Path, metavar="WORK_DIR",
                   help="the build directory (debug/run.py passes its parent directory itself)" if validate_default
                   else "build_output/<jit_dir>/ directory")
    _replay_flags(p)
    p.add_argument("--validate", action=argparse.BooleanOptionalAction, default=validate_default,
                   help="compare outputs with golden.py::compute_golden (RTOL/ATOL); default "
                        f"{'on (debug/run.py)' if validate_default else 'off'}")
    return p


def _config(args: argparse.Namespace):
    from .runconfig import RunConfig

    swimlane = args.swimlane if args.swimlane_level is None else args.swimlane_level
    return RunConfig(platform=args.platform, device_id=args.device_id, enable_pmu=args.pmu,
                     enable_chip_swimlane=swimlane, enable_dump_args=args.dump_args, enable_dep_gen=args.dep_gen,
                     enable_scope_stats=args.scope_stats, log_level=args.log_level)


def _inputs(work_dir: Path, args: argparse.Namespace,
            inline_inputs: Callable[[], Sequence] | None) -> tuple[list, bool, bool]:
    """(tensors, validate, inline) per §8.2's selection rule."""
    from .golden import load_golden

    has_golden = (work_dir / "golden.py").is_file()
    if inline_inputs is not None and not (args.validate and has_golden):
        tensors = list(inline_inputs())
        missing = [i for i, t in enumerate(tensors) if t is None]
        if missing:
            raise PyptoBuildError(f"inline input(s) {missing} are None (scalar parameters): set their values in "
                                  "_inline_inputs() of debug/run.py")
        return tensors, False, True
    golden = load_golden(work_dir)  # GoldenError (missing golden.py) for the standalone CLI
    return [value for _name, value in golden.inputs()], bool(args.validate), False


def main(argv: Sequence[str] | None = None, *, inline_inputs: Callable[[], Sequence] | None = None,
         user_compare: Callable[..., object] | None = None) -> int:
    """Parse `argv` (work_dir first), replay, validate or call `user_compare`; return the exit status.

    0 on success; 1 when validation fails (the AssertionError's message is
    printed), a unit fails to compile or the run fails; 2 for bad input
    (PyptoBuildError incl. GoldenError, OSError). Errors go to stderr.
    """
    from .replayer import replay
    from .runtime.executor import ExecutorError

    parser = make_parser(prog="debug/run.py" if inline_inputs is not None else _PROG,
                         validate_default=inline_inputs is not None)
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.platform != "host":
            raise PyptoBuildError(f"--platform {args.platform}: replay runs on the host runtime only (--platform host)")
        config = _config(args)
        if args.log_sync_pypto:
            print("[execute] --log-sync-pypto: there is no PyPTO C++ logger on the host runtime; ignored")
        work_dir = args.work_dir.resolve()
        tensors, validate, inline = _inputs(work_dir, args, inline_inputs)
        replay(work_dir, *tensors, config=config, recompile=args.recompile,
               rebuild_from_pto=not args.no_rebuild_from_pto, validate=validate, jobs=args.jobs,
               progress=sys.stdout)
        if inline and user_compare is not None:
            user_compare(*tensors)
        return 0
    except AssertionError as exc:
        print(str(exc) or "validation failed", file=sys.stderr)
        return 1
    except (BuildError, ExecutorError) as exc:
        print(f"pypto-build replay: {exc}", file=sys.stderr)
        return 1
    except (PyptoBuildError, OSError) as exc:
        print(f"pypto-build replay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pypto-build replay: interrupted", file=sys.stderr)
        from .workers import exit_now
        exit_now(130)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
