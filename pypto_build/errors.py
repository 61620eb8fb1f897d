"""The one error tree, the one map from it to exit statuses, and how a line is said.

Every exception pypto_build raises is a `PyptoBuildError`, in one of two branches:
`UserError` (the user's input or the environment: exit 2) and `Failure` (a unit,
the program or the validation failed: exit 1). `exit_status` is the one place
that turns what stopped a run into the exit status every front end gives
(exits.py prints the line). `warn`, `error` and `interrupted` are the one home of
the `pypto-build: ...` prefixes every front end prints on stderr. `say_fix` words a remedy for the front
end that runs: a command-line flag under `pypto-build` (`command_line`), the API's parameter otherwise.
"""
from __future__ import annotations

import sys

INTERRUPTED = "pypto-build: interrupted; finished units are kept"

# The exit statuses of every front end (docs/guide.md, "Commands"): each means one thing.
OK = 0
FAILED = 1          # a unit, the program or the validation failed (or was not made: NOT VALIDATED)
USER = 2            # the user's input or the environment: one line naming the file, what is wrong, the fix
INTERNAL = 3        # a bug (an exception outside this tree): its traceback, always
INTERRUPTED_STATUS = 130    # Ctrl-C or SIGTERM


_FRONT_END = ["api"]        # "cli" while a command-line front end runs (`exits.guarded`)


class command_line:       # noqa: N801 — used as `with command_line():`, like contextlib's
    """Within it, remedies name command-line flags (`say_fix`): every command-line front end runs in it. A
    class, not contextlib's decorator: this module is on the console script's quick path (no extra import)."""

    def __enter__(self) -> None:
        _FRONT_END.append("cli")

    def __exit__(self, *exc: object) -> None:
        _FRONT_END.pop()


def say_fix(cli: str, api: str) -> str:
    """A remedy in the words of the front end that runs: `cli` (a flag: `pass --platform host`) under
    `command_line`, else `api` (the parameter: `pass platform="host"`). Forked workers inherit it."""
    return cli if _FRONT_END[-1] == "cli" else api


def warn(message: str) -> None:
    """`pypto-build: warning: <message>` on stderr (the run goes on)."""
    print(f"pypto-build: warning: {message}", file=sys.stderr, flush=True)


def error(message: object) -> None:
    """`pypto-build: error: <message>` on stderr (the caller exits 2)."""
    print(f"pypto-build: error: {message}", file=sys.stderr, flush=True)


def interrupted() -> None:
    """The line after Ctrl-C / SIGTERM (the caller exits 130)."""
    print(INTERRUPTED, file=sys.stderr, flush=True)


def one_line(text: object, limit: int | None = None) -> str:
    """`text` with whitespace runs collapsed to one space, cut to `limit` characters (None: whole)."""
    flat = " ".join(str(text).split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."


def exit_status(exc: BaseException) -> int:
    """The exit status of a run that `exc` stopped: the one map, for every front end.

    A `Failure` is 1; a `UserError` (or a bare `PyptoBuildError`) and an `OSError` the run met (a full
    disk, a permission: the environment) are 2; an interrupt is 130; anything else is a bug: 3.
    """
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED_STATUS
    if isinstance(exc, Failure):
        return FAILED
    if isinstance(exc, (PyptoBuildError, OSError)):
        return USER
    return INTERNAL


class PyptoBuildError(Exception):
    """Every error pypto_build raises: a `UserError` or a `Failure` (never raised bare).

    The message is one line that names the file, what is wrong and how to fix it; a front end prints it
    without a traceback (with `--debug`, after one) and exits with `exit_status`.
    """


class UserError(PyptoBuildError):
    """A problem with the user's input or environment (exit 2): fix it and run again."""


class Failure(PyptoBuildError):
    """A unit, the program or the validation failed (exit 1): the input was read, the work was done, and
    it did not succeed."""


class LayoutError(UserError):
    """The build directory is not a kind we can read, or a path escapes it."""


class ManifestError(UserError, ValueError):
    """`kernel_config.py` cannot be read without executing it."""


class MetaError(UserError, ValueError):
    """A metadata sidecar (`compiled_meta.json`, `distributed_meta.json`) is invalid."""


class ArgumentError(UserError, TypeError, ValueError):
    """A program or a function was called with arguments that do not fit: those its sidecar declares (count,
    dtype, shape, contiguity, device, an Out/InOut tensor sharing memory with another; raised before any
    kernel runs) or the function's own. A TypeError and a
    ValueError too, as Python says a wrong call."""


class ToolchainError(UserError):
    """A compiler or platform tool is missing or unusable."""


class DepfileError(UserError, ValueError):
    """The text is not a depfile g++ wrote for this target (or holds a name it cannot represent)."""


class TooLarge(UserError):
    """A file is over its size limit; the message says by how much (no path: callers add it)."""


class SpliceError(UserError):
    """A kernel wrapper cannot take a ptoas body (sentinels missing or out of order, signature change)."""


class RemoteError(UserError):
    """The remote cache did not answer as a cache should (the run warns once and builds locally)."""


class HttpError(RemoteError):
    """A request to the remote cache did not complete as HTTP (refused, cut, late, garbled, too big)."""


class WatcherFailed(UserError):
    """The file watcher could not be started or stopped working (its cause says why)."""


class WorkerDied(UserError):
    """A `-j` worker process died on its own (OOM killer, crash); the run was stopped, finished units kept."""


class BuildError(Failure):
    """One or more units failed to build, or a validation the run was to make was not made.

    `failures` holds the failed tasks' `UnitResult`s (unit, status, reason, the compiler's message);
    `result` is the partial `BuildResult` when available.
    """

    def __init__(self, message: str, failures: list | None = None, result: object = None):
        super().__init__(message)
        self.failures = failures or []
        self.result = result


class ProgramFailed(Failure):
    """A replayed program crashed, exited, hung past its timeout or did not report a result."""


class ExecutorError(Failure, RuntimeError):
    """A host run could not start or failed; the message names the file, task or argument."""


class ValidationFailed(Failure, AssertionError):
    """An output does not match golden.py's (an AssertionError too, as PyPTO's replay raises). `golden`: the seal of
    the kept golden result it was compared against, when one was kept (the variant's record keeps it)."""

    golden: str | None = None
