"""PyPTO's `replay()`: build what changed, run the program on the platform the build chose, validate.

`replay(work_dir, *tensors, ...)` is PyPTO's replay with the same steps and
words; the build step is ours (content-keyed, so `recompile` defaults to False).
The program runs in a child process through the run stage's one entry (`run.run_built`).
Without tensors it runs on golden.py's inputs as `pypto-build replay [--validate]` does: through the
pipeline's own `replay:` / `validate:` task, so a passed validation is the directory's recorded verdict
(a later `validate()` or `pypto-build validate` reuses it). With the caller's tensors the run is about those
tensors, not golden.py's inputs: its verdict is never recorded as one.
"""
from __future__ import annotations

import io
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence, TextIO

from ..core import stages
from ..run import require_fit
from ..errors import ArgumentError, BuildError
from ..builddir.sidecars import load_sidecar
from ..builddir.runconfig import RunConfig, RunSpec
from ..options import Request


@dataclass
class ReplayResult:
    """What `replay()` did: the directory, its build, the outputs it validated and the diagnostics files."""

    work_dir: Path
    build: object                         # BuildResult
    validated: list[str] = field(default_factory=list)
    dfx: list[str] = field(default_factory=list)      # files written under dfx_outputs/


def replay(work_dir, *tensors, config: RunConfig | Mapping[str, Any] | None = None, recompile: bool = False,
           rebuild_from_pto: bool = True, validate: bool = False, jobs: int = 1,
           progress: TextIO | None | str = "stdout", run_timeout: float | None = None,
           allow_unapplied_pto: bool = False, quiet: bool = False) -> ReplayResult:
    """Build what changed, run the program on `tensors` (outputs written in place), optionally validate.

    `tensors` are checked against the directory's sidecar first (count, dtype, shape, contiguous, CPU, no
    Out/InOut tensor sharing memory with another): a misfit raises ArgumentError before anything is built or run. The program runs in a child process
    (a crash, an exit or a hang past `run_timeout` raises ProgramFailed; nothing is left running); the
    caller's tensors receive the outputs. With
    `validate`, outputs named in golden.py's `__outputs__` are compared with `compute_golden`
    run on a copy of the inputs taken before the run (RTOL/ATOL); a mismatch raises
    AssertionError naming the output, a validation that would compare nothing raises
    NothingCompared. Progress goes to `progress` (default: the current sys.stdout; None: silent); with
    `quiet` (-q) only the verdict, the program's log lines and any `.pto` edit not applied. `config` is a
    RunConfig or a dict of its fields.

    Without `tensors` the inputs are golden.py's and the run is the pipeline's `replay:` task (with
    `validate`: its `validate:` task, forced): a passed validation is recorded as the directory's verdict,
    which a later `validate()` / `pypto-build validate` reuses while it holds. A run on the caller's `tensors`
    is about those tensors, not golden.py's inputs: its result is never recorded as a verdict.
    """
    from .. import pipeline
    from ..run import run_built, runnable

    run = replace(RunSpec.given(config, run_timeout), quiet=quiet)
    config = run.config
    if progress == "stdout":
        progress = sys.stdout           # looked up per call (tests and callers may replace sys.stdout)
    request = Request.given(platform=config.platform, recompile=recompile, jobs=jobs, quiet=quiet, run=run,
                            rebuild_from_pto=None if rebuild_from_pto else False,
                            allow_unapplied_pto=allow_unapplied_pto)
    graph = request.plan(Path(work_dir).resolve())       # planned once: it says what runs, the build goes on it
    program = runnable(graph)
    work_dir = program.path
    say = (lambda line: print(line, file=progress, flush=True)) if progress else (lambda line: None)
    if tensors:
        require_fit(load_sidecar(work_dir), tensors)   # before anything is built or the child starts
    if validate:
        import torch
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise ArgumentError(f"replay(validate=True): argument {i} is {type(t).__name__}, expected a torch.Tensor")
    if not tensors:
        return _on_golden_inputs(work_dir, request, graph, validate, progress)
    result = pipeline.run(work_dir, request, graph=graph, progress=progress)
    outcome = run_built(program, config=config, validate=validate, say=say, tensors=tensors, timeout=run.timeout,
                        quiet=quiet)
    _copy_back(tensors, outcome.outputs or [])
    return ReplayResult(work_dir, result, outcome.checked, outcome.dfx)


def _on_golden_inputs(work_dir: Path, request: Request, graph, validate: bool, progress: TextIO | None
                      ) -> ReplayResult:
    """The run on golden.py's inputs as `pypto-build replay [--validate]` makes it: the pipeline's `replay:` task,
    or its `validate:` task forced (a fresh verdict, recorded as that task records every verdict). The run's
    lines (its task prints them) go to `progress` with the build's; a failed run raises the error tree's
    exception it failed with (a mismatch: AssertionError), as a run on the caller's tensors does."""
    from .. import pipeline

    stage = stages.VALIDATE if validate else stages.REPLAY
    request = replace(request, tasks=(stage,), force=(stages.prefix(stages.VALIDATE),) if validate else ())
    task = stages.task(stage, ".")
    with redirect_stdout(progress if progress is not None else io.StringIO()):
        try:
            result = pipeline.run(work_dir, request, graph=graph, progress=progress)
        except BuildError as exc:
            raised = exc.result.run_of(task) if exc.result is not None else None
            if isinstance(raised, BaseException):
                raise raised from None
            raise
    kept = result.run_of(task) or {}
    return ReplayResult(work_dir, result, list(kept.get("checked") or []), list(kept.get("dfx") or []))


def _copy_back(tensors: Sequence, outputs: Sequence) -> None:
    """The run's results into the caller's own tensors (same storage, same data_ptr)."""
    import torch

    with torch.no_grad():
        for mine, theirs in zip(tensors, outputs):
            if isinstance(mine, torch.Tensor) and isinstance(theirs, torch.Tensor):
                mine.copy_(theirs)
