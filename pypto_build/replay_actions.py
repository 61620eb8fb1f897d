"""doit actions of `replay:<sub>` and `validate:<sub>`: inputs from golden.py.

`replay:` always runs when selected (its output is what the user wants to see);
`validate:` keeps its verdict while the binaries, golden.py, its data files and
the run configuration are unchanged — what CI reruns need.
"""
from __future__ import annotations

import stat
from pathlib import Path

from doit.exceptions import TaskFailed

from .errors import PyptoBuildError
from .oserrors import one_line_failures
from .runconfig import RunConfig
from .safeio import refusal
from .runtime.executor import ExecutorError

# What a run of the program can raise on bad input or a wrong result: one failed task, no traceback.
_FAILURES = (PyptoBuildError, ExecutorError, AssertionError, TypeError, ValueError)


@one_line_failures
def run_replay(sub_rel: str, config: RunConfig, validate: bool):
    """Run the sub-build on golden.py's inputs; print PyPTO's lines; validate if asked."""
    try:
        checked, _dfx = _run(sub_rel, config, validate, print)
    except _FAILURES as exc:
        return TaskFailed(str(exc))
    return {"validated": checked}


@one_line_failures
def run_validate(sub_rel: str, config: RunConfig):
    """Run and validate; the verdict is recorded only when it passes."""
    lines: list[str] = []
    try:
        checked, _dfx = _run(sub_rel, config, True, lines.append)
    except _FAILURES as exc:
        return TaskFailed(f"validation of {Path(sub_rel).resolve()} failed: {exc}")
    verdict = "PASSED" if checked else "no outputs declared in golden.py __outputs__ (nothing compared)"
    return {"verdict": verdict, "outputs": checked, "config": config.key(), "lines": lines}


def _check_data(sub: Path) -> None:
    """golden.py reads its data/ files itself: a FIFO or device there would block it, so none may be there."""
    for path in sorted((sub / "data").rglob("*")):
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise PyptoBuildError(refusal(path, mode, "golden.py would block or fail reading it — replace it "
                                                      "with the data file"))


def _run(sub_rel: str, config: RunConfig, validate: bool, say) -> tuple[list[str], list[str]]:
    from .golden import compare, load_golden
    from .meta import load_sidecar
    from .replayer import execute, save_outputs

    sub = Path(sub_rel)
    _check_data(sub)
    golden = load_golden(sub)
    pairs = golden.inputs()
    golden.check_inputs(pairs, load_sidecar(sub))
    names = [n for n, _ in pairs]
    values = [v for _, v in pairs]
    dfx = execute(sub, values, config, names=names, say=say)
    say(f"Replay finished. DFX artefacts (if any) under {sub.resolve() / 'dfx_outputs'}")
    named = dict(pairs)
    save_outputs(sub, named)
    checked = compare(golden, named) if validate else []
    if checked:
        say("Golden validation: PASSED")
    return checked, dfx
