"""doit actions of `replay:<sub>` and `validate:<sub>`: inputs from golden.py, the program in a child process.

`replay:` always runs when selected (its output is what the user wants to see);
`validate:` keeps its verdict while the binaries, the run configuration and the
kept golden result it was compared against (and everything that result is keyed
on: `golden_key`) are unchanged — what CI reruns need. A verdict is recorded
only for a comparison that ran and passed.
"""
from __future__ import annotations

from pathlib import Path

from doit.exceptions import TaskFailed

from ..errors import USER, PyptoBuildError, exit_status
from ..toolchain.local_slots import local_work
from ..core.oserrors import one_line_failures
from ..builddir.runconfig import RunConfig


class Refused(TaskFailed):
    """The run refused its input (a `UserError` in the child: e.g. a symbolic link among the L3 dispatch
    folders): not a failed program but the user's to fix. The reporter keeps its line and the pipeline raises
    it as a `UserError` (exit 2), where a failed unit would be exit 1."""


def _failures() -> tuple[type[BaseException], ...]:
    """What a run of the program can raise on bad input, a crash or a wrong result: one failed task, no
    traceback. (The runtime is imported by the action that runs, not by every build that plans one.)"""
    from ..errors import ExecutorError
    return (PyptoBuildError, ExecutorError, AssertionError)


@one_line_failures
@local_work
def run_replay(sub_rel: str, config: RunConfig, timeout: float, quiet: bool = False):
    """Run the sub-build on golden.py's inputs; print PyPTO's lines as they come (`quiet`: not the progress)."""
    from .child import run_program

    failures = _failures()
    try:
        run_program(Path(sub_rel), config, validate=False, timeout=timeout, say=_say, quiet=quiet)
    except failures as exc:
        return _failed(sub_rel, "replay", exc)
    return {}


@one_line_failures
@local_work
def run_validate(sub_rel: str, config: RunConfig, timeout: float, quiet: bool = False):
    """Run and validate; the verdict (and the seal of the golden result it was compared against, which keys
    it: `run.checks.VerdictCheck`) is recorded only when it passes."""
    from .child import run_program

    failures = _failures()
    try:
        outcome = run_program(Path(sub_rel), config, validate=True, timeout=timeout, say=_say, quiet=quiet)
    except failures as exc:
        return _failed(sub_rel, "validation", exc)
    return {"verdict": "PASSED", "outputs": outcome.checked, "config": config.key(),
            "golden": {"seal": outcome.golden, "states": {}}}


def _say(line: str) -> None:
    print(line, flush=True)


def _failed(sub_rel: str, what: str, exc: BaseException) -> TaskFailed:
    """A refusal of the input (what the error tree gives 2: `errors.exit_status`) keeps its own line (it names
    the file and the fix); a failure says what failed."""
    if exit_status(exc) == USER:
        return Refused(str(exc))
    return TaskFailed(_failure(sub_rel, what, exc))


def _failure(sub_rel: str, what: str, exc: BaseException) -> str:
    """The one line (what failed, in which directory) and the details after it."""
    text = str(exc) or type(exc).__name__
    head, _, rest = text.partition("\n")
    where = Path(sub_rel).resolve()
    return f"{what} of {where} failed: {head}" + (f"\n{rest}" if rest else "")
