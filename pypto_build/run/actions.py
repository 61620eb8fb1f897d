"""doit actions of `replay:<sub>` and `validate:<sub>`: the plan's program on golden.py's inputs, through the run
stage's one entry (`entry.run_built`, in a child process).

`replay:` always runs when selected (its output is what the user wants to see);
`validate:` keeps its verdict while the binaries, the run configuration and the
kept golden result it was compared against (and everything that result is keyed
on: `golden_key`) are unchanged — what CI reruns need. A verdict is recorded
only for a comparison that ran and passed: this is the one route that records a verdict, whoever asked for the
run (`pypto-build validate`, `replay --validate`, `compat.replay` on golden.py's inputs, a `watch` round). Each
task keeps what its run did for the caller (`run`: outputs compared, diagnostics; a failure carries the typed
error); a caller in this process may also start and hear the run itself (`builddir.runconfig.InProcess`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from doit.exceptions import TaskFailed

from ..errors import USER, PyptoBuildError, exit_status
from ..toolchain.local_slots import local_work
from ..core.oserrors import one_line_failures
from ..builddir.runconfig import InProcess, RunConfig
from ..plan.program import Program
from ..variants.record import Recorder

if TYPE_CHECKING:
    from .entry import RunOutcome


class RunFailed(TaskFailed):
    """A failed run of a `replay:`/`validate:` task: its one line for the reporter, and `error`, the error tree's
    exception the run raised (`ValidationFailed`, `ProgramFailed`, ...) for a caller that raises it as it is
    (`compat.replay`: `BuildResult.run_of`)."""

    def __init__(self, msg: str, error: BaseException | None = None) -> None:
        super().__init__(msg)
        self.error = error

    def __reduce__(self):           # doit's exceptions keep no args: say how to make it again (`-j`)
        return type(self), (self.message, self.error)


class Refused(RunFailed):
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
def run_replay(program: Program, config: RunConfig, timeout: float, quiet: bool = False,
               here: InProcess | None = None):
    """Run the program on golden.py's inputs; print PyPTO's lines as they come (`quiet`: not the progress;
    `here`: a caller in this process hears them, `_entry`)."""
    failures = _failures()
    try:
        outcome = _entry(program, config, timeout, quiet, here, validate=False)
    except failures as exc:
        return _failed(program, "replay", exc)
    return {"run": _kept(outcome)}


@one_line_failures
@local_work
def run_validate(program: Program, config: RunConfig, timeout: float, quiet: bool = False,
                 here: InProcess | None = None, keep: Recorder | None = None):
    """Run and validate; the verdict (and the seal of the golden result it was compared against, which keys
    it: `run.checks.VerdictCheck`) is kept only when it passes — the same values whoever asked (`here`: a
    caller in this process, `_entry`). Passing, failing or crashed, the run's variant is recorded (`keep`:
    `variants.record`)."""
    failures = _failures()
    try:
        outcome = _entry(program, config, timeout, quiet, here, validate=True)
    except failures as exc:
        _record(keep, program, config, exc)
        return _failed(program, "validation", exc)
    _record(keep, program, config, None, f"compared {', '.join(outcome.checked)}", outcome.golden)
    return {"verdict": "PASSED", "outputs": outcome.checked, "config": program.config(config).key(),
            "golden": {"seal": outcome.golden, "states": {}}, "run": _kept(outcome)}


def _entry(program: Program, config: RunConfig, timeout: float, quiet: bool, here: InProcess | None, *,
           validate: bool) -> RunOutcome:
    """The run stage's entry as a task calls it. With `here` (a caller in this process: doit runs this action
    there, `-j` 1) the run starts and is heard as that caller says (`InProcess`: a warm start, timing runs, its
    phase and line callbacks), and what the entry returned or raised is left in `here.ran` for it; the task's
    values, which doit keeps, are the same either way."""
    from .entry import run_built

    if here is None:
        return run_built(program, config=config, validate=validate, timeout=timeout, say=_say, quiet=quiet)
    begun = None
    if here.ahead is not None:              # its child may have prepared while the compiler ran
        begun = here.ahead.take(program, program.config(config), validate=validate, quiet=quiet,
                                timing_runs=here.timing_runs)
    try:
        here.ran = run_built(program, config=config, validate=validate, timeout=timeout, say=here.say or _say,
                             quiet=quiet, start=here.start, timing_runs=here.timing_runs, on_phase=here.on_phase,
                             begun=begun)
    except BaseException as exc:
        here.ran = exc
        raise
    finally:
        if begun is not None:
            begun.stop()                    # taken here: stopped here, whatever the entry did with it
    return here.ran


def _record(keep: Recorder | None, program: Program, config: RunConfig, exc: BaseException | None,
            figures: str = "", golden: str | None = None) -> None:
    """Record the variant that ran with its verdict: PASSED, FAILED (an output off: how far), CRASHED (the program
    failed); nothing for a refusal or a golden.py that failed (no verdict on the binaries). With the seal of the
    golden result it was compared against and the run configuration's key: what the verdict holds for."""
    from ..errors import ExecutorError, ProgramFailed, ValidationFailed

    if keep is None:
        return
    if exc is None:
        verdict = "PASSED"
    elif isinstance(exc, ValidationFailed):
        verdict, figures, golden = "FAILED", str(exc).partition("\n")[0], exc.golden
    elif isinstance(exc, (ProgramFailed, ExecutorError)):          # not golden.py's failure (a GoldenError)
        verdict, figures = "CRASHED", str(exc).partition("\n")[0]
    else:
        return
    keep.verdict(Path(program.path), verdict, figures, program.platform, golden, program.config(config).key())


def _kept(outcome: RunOutcome) -> dict:
    """What a task keeps of its run for the caller (`pipeline.BuildResult.run_of`): outputs compared, diagnostics."""
    return {"checked": list(outcome.checked), "dfx": list(outcome.dfx)}


def _say(line: str) -> None:
    print(line, flush=True)


def _failed(program: Program, what: str, exc: BaseException) -> TaskFailed:
    """A refusal of the input (what the error tree gives 2: `errors.exit_status`) keeps its own line (it names
    the file and the fix); a failure says what failed. Either carries the error as the run raised it."""
    if exit_status(exc) == USER:
        return Refused(str(exc), exc)
    return RunFailed(_failure(program, what, exc), exc)


def _failure(program: Program, what: str, exc: BaseException) -> str:
    """The one line (what failed, in which directory) and the details after it."""
    text = str(exc) or type(exc).__name__
    head, _, rest = text.partition("\n")
    return f"{what} of {program.path} failed: {head}" + (f"\n{rest}" if rest else "")
