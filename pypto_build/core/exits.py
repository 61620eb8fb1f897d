"""How every front end ends: what stopped it said in one line, and the exit status `errors.exit_status` gives.

`guarded(call)` runs a front end's work (`pypto-build`'s verbs, doit's commands,
`debug/run.py`); `report(exc)` says one exception and returns its status: 1 for a
`Failure` (`pypto-build: <what failed>`), 2 for a `UserError` or an `OSError`
(`pypto-build: error: <file>: <what>; <fix>`), 130 for an interrupt, 3 for
anything else — a bug, said with its traceback. `--debug` puts the traceback
before the line and changes nothing else, the exit status included.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

from . import pipes

from ..errors import (FAILED, INTERNAL, INTERRUPTED_STATUS, USER, UserError, WorkerDied, command_line, error,
                      exit_status, interrupted, one_line)


def report(exc: BaseException, *, debug: bool = False) -> int:
    """Say `exc` on stderr as every front end says it; its exit status (`errors.exit_status`)."""
    status = exit_status(exc)
    if status == INTERRUPTED_STATUS:
        interrupted()
        return status
    if debug or status == INTERNAL:
        import traceback
        traceback.print_exception(exc)
    if status == FAILED:
        print(f"pypto-build: {exc}", file=sys.stderr, flush=True)
    elif status == USER:
        if isinstance(exc, OSError):
            from .oserrors import describe
            error(describe(exc))
        else:
            error(exc)
    else:
        error(f"internal error: {type(exc).__name__}: {one_line(exc, 400)} — not an error pypto_build knows: a bug "
              "(the traceback above shows where); please report it")
    return status


def guarded(call: Callable[[], int | None], *, debug: bool = False) -> int:
    """`call()`'s exit status; whatever stops it is said by `report`. After an interrupt, or a `-j` worker
    that died, the process leaves at once (`exit_now`): the state is saved already. A reader that closes
    our stdout or stderr stops nothing (`pipes.guard`). Its remedies name command-line flags
    (`errors.command_line`)."""
    pipes.guard()
    try:
        with command_line():
            return call() or 0
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:        # noqa: BLE001 — every way out is said and has its status
        status = report(exc, debug=debug)
        if status == INTERRUPTED_STATUS or isinstance(exc, WorkerDied):
            exit_now(status)
        return status


def exit_now(code: int) -> NoReturn:
    """Leave after an interrupt without multiprocessing's exit handlers: the state is already saved,
    and joining a doit worker or queue thread the interrupt caught mid-handshake can hang forever."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class OneLineOptions:
    """A doit command (mixin, first base) whose bad option is one line and exit 2, as `pypto-build`'s: doit's
    own command line says it with status 3, which here is a bug's."""

    def parse_execute(self, in_args):
        from doit.cmdparse import CmdParseError
        try:
            return super().parse_execute(in_args)
        except CmdParseError as exc:      # doit's text lists every option after the problem: the problem only
            said = one_line(exc).split(" (parsing options:")[0].removeprefix("Error parsing Command: ")
            return report(UserError(f"{self.bin_name} {self.name}: {said}; see `{self.bin_name} help {self.name}`"))
