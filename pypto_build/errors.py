"""Exception types: one line for the user, a traceback only with --debug; and how a line is said.

`warn`, `error` and `interrupted` are the one home of the `pypto-build: ...`
prefixes every front end prints on stderr.
"""
from __future__ import annotations

import sys

INTERRUPTED = "pypto-build: interrupted; finished units are kept"


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


class PyptoBuildError(Exception):
    """A problem with the user's input or environment.

    The message is one line that names the file, what is wrong and how to fix
    it; the CLI prints it without a traceback.
    """


class LayoutError(PyptoBuildError):
    """The build directory is not a kind we can read, or a path escapes it."""


class ManifestError(PyptoBuildError, ValueError):
    """`kernel_config.py` cannot be read without executing it."""


class MetaError(PyptoBuildError, ValueError):
    """A metadata sidecar (`compiled_meta.json`, `distributed_meta.json`) is invalid."""


class ArgumentError(PyptoBuildError, TypeError, ValueError):
    """A program was called with arguments that do not fit the parameters its sidecar declares (count, dtype,
    shape, contiguity, device); raised before any kernel runs. A TypeError and a ValueError too, as Python
    says a wrong call."""


class ToolchainError(PyptoBuildError):
    """A compiler or platform tool is missing or unusable."""


class BuildError(PyptoBuildError):
    """One or more units failed to build.

    `failures` holds one `UnitFailure` per failing unit (unit, command, compiler
    message); `result` is the partial `BuildResult` when available.
    """

    def __init__(self, message: str, failures: list | None = None, result: object = None):
        super().__init__(message)
        self.failures = failures or []
        self.result = result


class SpliceError(PyptoBuildError):
    """A kernel wrapper cannot take a ptoas body (sentinels missing or out of order, signature change)."""


class WorkerDied(PyptoBuildError):
    """A `-j` worker process died on its own (OOM killer, crash); the run was stopped, finished units kept."""


class ProgramFailed(PyptoBuildError):
    """A replayed program crashed, exited, hung past its timeout or did not report a result."""
