"""The run stage's one entry: `run_built` runs a built program and returns one typed outcome (`RunOutcome`).

Every way of running a program calls it: the `replay:`/`validate:` tasks (`actions`; `watch`'s rounds and PyPTO's
`replay()` on golden.py's inputs run those), PyPTO's `replay()` on the caller's tensors, `CompiledProgram` and
`benchmark()`, `DistributedCompiledProgram`. What runs
is data: the `Program` the plan handed over (its directory, layout kind and platform: nothing is classified
again, and `Program.config` puts the platform into the `RunConfig` here, once) and the `Binaries` it loads
(today always the program's own; a caller may name others — a scratch copy — through this same entry).

Two ways to run. In a child process (the default): golden.py's inputs or the caller's tensors, the run, the
outputs kept, the comparison with golden.py (`child.in_child`: a crash or a hang is a failed run, not a dead
tool). In process (`loaded`, a `Loaded` the caller keeps: what `CompiledProgram` needs): the caller's tensors
only, no golden.py, the host executor kept loaded across calls until the binaries change.

A verdict is recorded by one route only: the `validate:` task (the pipeline's), whose values key it
(`checks.VerdictCheck`). A run on the caller's tensors is about those tensors, not golden.py's inputs: never
recorded as a verdict.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Sequence

from ..builddir.layout import BuildKind
from ..builddir.markers import DEBUG_DIR, DFX_OUTPUTS, KERNEL_CONFIG, NEXT_LEVELS, PTOAS_DIR
from ..builddir.state_dir import STATE_DIR
from ..errors import ArgumentError
from ..plan.program import Binaries, Program
from .child import DEFAULT_TIMEOUT, Begun, RunOutcome, in_child

__all__ = ["Begun", "Binaries", "Loaded", "RunOutcome", "begin", "run_built"]

_SKIP_DIRS = frozenset((STATE_DIR, NEXT_LEVELS, DFX_OUTPUTS, DEBUG_DIR, PTOAS_DIR))


class Loaded:
    """What an in-process run keeps between calls: the host executor of the binaries it loaded, and their
    identity (a rebuild replaces files atomically: a new identity loads them again). One per caller
    (`CompiledProgram`); `close` drops them."""

    def __init__(self) -> None:
        self.executor = None
        self.fingerprint: tuple | None = None

    def host_executor(self, where: Path):
        """The executor of `where`'s binaries as they are now (reloaded when they changed)."""
        from ..platforms import HostExecutor

        fingerprint = _fingerprint(Path(where))
        if self.executor is None or fingerprint != self.fingerprint:
            self.close()
            self.executor = HostExecutor(Path(where))
            self.fingerprint = fingerprint
        return self.executor

    def close(self) -> None:
        if self.executor is not None:
            self.executor.close()
        self.executor = self.fingerprint = None


def begin(program: Program, *, validate: bool, config=None, start: Callable | None = None, timing_runs: int = 1,
          quiet: bool = False):
    """The first half of a run in a child process, begun before the binaries exist (`ahead.RunAhead`): the
    child prepares golden.py's inputs and result (`prepare.prepare`); `run_built(..., begun=)` runs it."""
    from .child import begin as begin_child

    return begin_child(program, program.config(config), validate=validate, start=start, timing_runs=timing_runs,
                       quiet=quiet)


def run_built(program: Program, *, validate: bool = False, config=None, binaries: Binaries | None = None,
              tensors: Sequence | None = None, names: Sequence[str] | None = None,
              timeout: float = DEFAULT_TIMEOUT, say: Callable[[str], None] = print, quiet: bool = False,
              start: Callable | None = None, timing_runs: int = 1, on_phase: Callable[[str], None] | None = None,
              loaded: Loaded | None = None, device_ids: Sequence[int] | None = None,
              begun: Begun | None = None) -> RunOutcome:
    """Run `program` (its `binaries`, default its own) on its platform and return what happened; raise the
    error tree's class on any failure (`ProgramFailed`, `ValidationFailed` — an AssertionError —, `GoldenError`,
    a `UserError` for refused input...).

    In a child process unless `loaded` is given: inputs from golden.py (or `tensors`), the outputs kept under
    `.pypto_build/replay/`, with `validate` compared with golden.py's result; `start`, `timing_runs`,
    `on_phase`, `quiet`, `begun` (its child, begun ahead: `ahead.RunAhead`): `child.in_child`. With `loaded`,
    in this process on `tensors` (outputs written in
    place), `timing_runs` times; `device_ids`: an L3 program's devices (None: its sidecar's).
    """
    config = program.config(config)                # the platform the plan chose: put into the run's config here only
    binaries = binaries or Binaries.own(program)
    if loaded is None:
        return in_child(program, binaries, config, validate=validate, timeout=timeout, say=say, tensors=tensors,
                        names=names, start=start, timing_runs=timing_runs, on_phase=on_phase, quiet=quiet,
                        begun=begun)
    if tensors is None or validate:
        raise ArgumentError("an in-process run takes the caller's tensors and compares nothing; run golden.py's "
                            "inputs (and validate) in a child process")
    run = _in_process(program, binaries, config, names, loaded, device_ids)
    seconds, dfx = [], []
    for _ in range(max(1, int(timing_runs))):
        began = time.perf_counter_ns()
        dfx = run(tensors)
        seconds.append((time.perf_counter_ns() - began) / 1e9)
    return RunOutcome(dfx=dfx, outputs=list(tensors), run_seconds=seconds)


def _in_process(program: Program, binaries: Binaries, config, names: Sequence[str] | None, loaded: Loaded,
                device_ids: Sequence[int] | None) -> Callable[[Sequence], list[str]]:
    """One run of `program` in this process, ready to be timed: the loaded host executor where it serves (an L2
    program on host without diagnostics asked for), else the platform's runner (`execution.execute`)."""
    from .execution import execute

    diagnostics = config.enable_chip_swimlane or config.enable_dump_args
    if program.kind is BuildKind.L2 and program.platform == "host" and not diagnostics:
        executor = loaded.host_executor(binaries.where)
        return lambda args: (executor.run(args, param_names=names), [])[1]
    if program.platform != "host":
        loaded.close()              # simpler loads the binaries on each run: nothing stays loaded
    return lambda args: execute(binaries.where, list(args), config, kind=program.kind, names=names,
                                say=lambda _line: None, device_ids=device_ids)


def _fingerprint(where: Path) -> tuple:
    """Identity of every loadable binary (and kernel_config.py) under `where`, the host platform's outputs too."""
    from ..platforms import HOST_OUTPUTS

    found = []
    for top in (where, where / HOST_OUTPUTS):
        for dirpath, dirs, files in os.walk(top):
            if dirpath == str(where):
                dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
            for name in files:
                if name.endswith(".so") or (dirpath == str(where) and name == KERNEL_CONFIG):
                    st = os.stat(os.path.join(dirpath, name))
                    found.append((os.path.join(dirpath, name), st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(sorted(found))
