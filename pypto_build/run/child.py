"""Run a built directory's program in a child process: a crash or a hang is a failed run, not a dead tool.

`in_child()` (the parent side; called by the run stage's entry, `entry.run_built`) starts
`python -P -m pypto_build.run.child` in its own session (or takes the one `begin` started), sends it what to
prepare and which binaries to run, prints the lines it sends back, and
returns an outcome only when the child said so explicitly. Anything else is a
failure naming the program and what was running: a signal (segfault, abort), an
exit status (`exit()` in a kernel, `sys.exit()` in golden.py), a timeout
(`PYPTO_RUN_TIMEOUT`, `--run-timeout`) or the user's Ctrl-C / SIGTERM. The
child's whole process group (L3 rank workers included) is killed on every way
out, and the child dies with its parent.

The child (`_child()`) works in two steps, so that the first may run while the
binaries are still being built (`begin` sends it, `ahead.RunAhead` begins it early):
it prepares what needs no binary (`prepare.prepare`: golden.py's inputs or the
caller's tensors, the expected outputs, the runtime's modules), then waits to be told
the binaries, checks that what it prepared still holds (`Ready.holds`; else it
prepares again), runs the program on its platform, compares, and keeps the
outputs under `.pypto_build/replay/` (`execution.save_outputs`) after the verdict.
While golden.py's code runs, an audit hook records every file it opens and every
module it imports (outside the Python installation and this package), and
`os.environ` records every variable it reads, so its kept result (and the verdict
made against it) can be keyed on them (`golden_cache`).

Messages are plain pickles (tensors by value, never shared-memory handles) over a
pipe (`multiprocessing.connection.Connection`): the child runs the same user's code
with the same rights, so they add no exposure.
"""
from __future__ import annotations

import gc
import pickle
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..core import pipes, procs
from .starter import spawn
from .reads import Reads
from ..errors import ProgramFailed, PyptoBuildError, UserError, ValidationFailed, one_line
from ..builddir.markers import DFX_OUTPUTS
from ..builddir.runconfig import RunConfig
from ..core.safeio import refusal

if TYPE_CHECKING:
    from ..plan.program import Binaries, Program
    from .prepare import Ready

DEFAULT_TIMEOUT = 1800.0
_POLL_S = 0.2
_GRACE_S = 10.0             # a child that reported may take this long to leave by itself
PROGRESS = "[execute] "     # how a runner's progress lines start (platforms.Runner); its other lines are the program's


@dataclass
class RunOutcome:
    """What a finished run reported: outputs compared, diagnostics written, the files golden.py's result is
    keyed on, and the seal of the kept golden result the outputs were compared against."""

    checked: list[str] = field(default_factory=list)
    dfx: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)          # what golden.py read, and the sub-build's own files
    golden: str | None = None                               # None: no golden result was kept (a verdict is not)
    outputs: list | None = None            # the caller's tensors after the run (tensor mode)
    run_seconds: list[float] = field(default_factory=list)   # each timed run of the program (`timing_runs`)


@dataclass
class Begun:
    """A child started and told what to prepare (`prepare.prepare`: golden.py's inputs and result), waiting to
    be told which binaries to run. `ahead`: begun while the binaries were being built (`ahead.RunAhead`), so
    the child checks what it prepared again before it runs them."""

    started: object
    request: dict
    ahead: bool = False
    stopped: bool = False

    def stop(self) -> None:
        """Close its pipes and kill its session, once (a second call must not signal a pid reused since)."""
        if self.stopped:
            return
        self.stopped = True
        self.started.inbox.close()
        self.started.outbox.close()
        self.started.stop()


def begin(program: Program, config: RunConfig, *, validate: bool, tensors: Sequence | None = None,
          names: Sequence[str] | None = None, start: Callable | None = None, timing_runs: int = 1,
          quiet: bool = False) -> Begun:
    """Start the child of a run of `program` and send it what to prepare; `in_child` sends it the binaries."""
    sub_dir = Path(program.path).resolve()
    _check_data(sub_dir)
    started = (start or spawn)(sub_dir, _child)
    request = {"sub": str(sub_dir), "kind": program.kind, "config": config, "validate": validate,
               "names": list(names or []), "tensors": None if tensors is None else list(tensors),
               "sys_path": list(sys.path), "parent": started.parent, "timing_runs": timing_runs, "quiet": quiet}
    try:
        started.outbox.send_bytes(pickle.dumps(request))
    except OSError:
        pass                                       # the child died at once: its exit status says how
    return Begun(started, request)


def in_child(program: Program, binaries: Binaries, config: RunConfig, *, validate: bool,
             timeout: float = DEFAULT_TIMEOUT, say: Callable[[str], None] = print, tensors: Sequence | None = None,
             names: Sequence[str] | None = None, start: Callable | None = None, timing_runs: int = 1,
             on_phase: Callable[[str], None] | None = None, quiet: bool = False,
             begun: Begun | None = None) -> RunOutcome:
    """Run `program` (loading `binaries`) in a child process (inputs from golden.py, or `tensors`); raise on any
    failure. `config` names the platform already (`entry.run_built` put it there).

    `start` starts the process (`starter.spawn`, a new interpreter, by default; `starter.WarmStarter.start`
    forks a warm one); `timing_runs` runs the program that many times (fresh inputs each time) and reports
    each run's seconds; `on_phase` hears what the child is doing as it starts each step. With `quiet` (-q)
    the child says only the verdict and the program's own log lines, none of its progress. `begun`: the child
    already started for this run (`begin`, by `ahead.RunAhead`), else one is started here.

    Raises ProgramFailed (crash, exit, timeout), GoldenError/NothingCompared, ExecutorError, or
    AssertionError for an output that does not match — the same types the in-process steps raise.
    """
    if begun is None:
        begun = begin(program, config, validate=validate, tensors=tensors, names=names, start=start,
                      timing_runs=timing_runs, quiet=quiet)
    started = begun.started
    inbox, outbox = started.inbox, started.outbox
    sub_dir = begun.request["sub"]
    what = f"the program of {sub_dir}"
    doing = "starting"
    try:
        try:
            outbox.send_bytes(pickle.dumps({"binaries": str(Path(binaries.where).resolve()), "ahead": begun.ahead}))
        except OSError:
            pass                                   # the child died: its exit status says how
        outbox.close()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProgramFailed(f"{what} did not finish within {timeout:g} s (while {doing}) and was stopped; "
                                    "fix the hang, or raise --run-timeout / PYPTO_RUN_TIMEOUT")
            try:
                ready = inbox.poll(min(left, _POLL_S))
                message = pickle.loads(inbox.recv_bytes()) if ready else None
            except (EOFError, OSError):
                raise ProgramFailed(_died(what, _status(started), doing)) from None
            if message is None:
                continue
            kind, payload = message
            if kind == "line":
                say(payload)
            elif kind == "at":
                doing = payload
                if on_phase is not None:
                    on_phase(payload)
            elif kind == "done":
                started.stop(grace=_GRACE_S)        # its exit handlers run (rank workers' temp folders go)
                return RunOutcome(**payload)
            elif kind == "error":                 # one of the error tree's own, as the child raised it
                started.stop(grace=_GRACE_S)
                raise payload
    finally:
        begun.stop()


def _check_data(sub: Path) -> None:
    """golden.py reads its data/ files itself: a FIFO or device there would block it, so none may be there."""
    for path in sorted((sub / "data").rglob("*")):
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UserError(refusal(path, mode, "golden.py would block or fail reading it — replace it "
                                                      "with the data file"))


def _died(what: str, status: int | None, doing: str) -> str:
    how = (f"was {procs.describe(status)}" if status is not None and status < 0 else
           f"exited with status {status} before reporting a result (exit() in a kernel or golden.py?)")
    return f"{what} {how} while {doing}; nothing was compared — fix it and run again"


def _status(started) -> int | None:
    """The child's exit status once its end of the pipe closed (it is leaving, or closed it itself)."""
    started.stop(grace=5.0)
    return started.returncode


# --- the child ---------------------------------------------------------------------------------------------


def _child(inbox: Connection, outbox: Connection) -> None:
    """Prepare (`prepare.prepare`: nothing of it reads a binary), then wait to be told the binaries and run them.
    A preparation that failed is tried once more then if it was made ahead: the input may have been fixed while
    the program was built."""
    pipes.guard()               # what the program prints goes to our stdout: a reader gone stops nothing
    request = pickle.loads(inbox.recv_bytes())
    procs.die_with_parent(request["parent"])
    sys.path[:] = request["sys_path"]

    def send(kind: str, payload) -> None:
        outbox.send_bytes(pickle.dumps((kind, payload)))

    steps = _Steps(request, send)
    try:
        ready = steps.prepare()
    except (Exception, SystemExit) as exc:    # noqa: BLE001 - said once the run is asked for
        ready = exc
    try:
        go = pickle.loads(inbox.recv_bytes())
    except (EOFError, OSError):
        return                                  # the run was not needed after all
    try:
        if isinstance(ready, BaseException):
            if not go["ahead"]:
                raise ready
            ready = steps.prepare()
        send("done", steps.run(ready, go))
        gc.freeze()             # leaving then skips collecting torch's objects (a third of a second)
    except (Exception, SystemExit) as exc:    # noqa: BLE001 - every way out is one typed error for the parent
        send("error", _typed(exc, request["sub"]))


def _typed(exc: BaseException, sub: str) -> PyptoBuildError:
    """What the child raised as the error tree's class the parent raises (an in-process run raises the same):
    ours as they are, a failed comparison `ValidationFailed`, anything else of golden.py's or the program's
    `ProgramFailed` naming what was running."""
    if isinstance(exc, PyptoBuildError):
        try:
            back = pickle.loads(pickle.dumps(exc))
        except Exception:   # noqa: BLE001 - an error that does not cross a pipe: its kind and text do
            back = None
        if type(back) is type(exc) and str(back) == str(exc):
            return exc
        return (UserError if isinstance(exc, UserError) else ProgramFailed)(str(exc))
    if isinstance(exc, AssertionError):
        return ValidationFailed(str(exc) or "validation failed")
    if isinstance(exc, SystemExit):
        return ProgramFailed(f"{sub}: sys.exit({exc.code!r}) was called while {Reads.doing}; nothing was compared "
                             "— golden.py and the program must not exit")
    return ProgramFailed(f"{sub}: {one_line(f'{type(exc).__name__}: {exc}', 400)} while {Reads.doing}")


class _Steps:
    """The child's two steps: prepare what needs no binaries, then run the binaries, compare, keep the outputs."""

    def __init__(self, request: dict, send: Callable[[str, object], None]) -> None:
        self.request, self.send = request, send
        self.say = (lambda line: send("line", line))
        self.note, self.said_by_run = self.say, self.say     # progress: ours, and the platform's `[execute] ` lines
        if request.get("quiet"):
            self.note = (lambda line: None)
            self.said_by_run = (lambda line: None if line.startswith(PROGRESS) else self.say(line))

    def at(self, what: str) -> None:
        Reads.doing = what
        self.send("at", what)

    def prepare(self) -> "Ready":
        from ..builddir.layout import BuildKind
        from ..platforms import implementation

        config: RunConfig = self.request["config"]
        runner = implementation(config.platform or "host").runner()
        if self.request["kind"] is BuildKind.L3:    # e.g. the rank workers' server: its imports overlap ours
            runner.prepare_l3()
        self.at("importing torch")
        from .golden import require_run_extra
        require_run_extra()             # every run needs torch (golden.py's tensors, the runtime): say so first
        from .prepare import prepare
        ready = prepare(self.request, self.note, self.at)
        runner.prepare()
        return ready

    def run(self, ready: "Ready", go: dict) -> dict:
        from .execution import execute, save_outputs
        from .golden import compare, copies

        request, sub, built = self.request, Path(self.request["sub"]), Path(go["binaries"])
        config: RunConfig = request["config"]
        if go["ahead"]:
            why = ready.holds(sub)
            if why:
                self.note(f"golden: prepared again ({why})")
                ready = self.prepare()
        named = ready.named
        runs = max(1, int(request.get("timing_runs") or 1))
        pristine = copies(named) if runs > 1 else {}
        self.at(f"running the program on {config.platform}")
        began = time.perf_counter()
        dfx = execute(built, list(named.values()), config, kind=request["kind"], names=list(named),
                      say=self.said_by_run, on_task=lambda what: self.at(f"running {what}"))
        seconds = [time.perf_counter() - began]
        self.note(f"Replay finished. DFX artefacts (if any) under {built / DFX_OUTPUTS}")
        checked: list[str] = []
        writer = _Background(save_outputs, sub, {n: named[n] for n in _outputs(ready, sub)})
        try:                            # the outputs are written while they are compared (both only read them)
            if request["validate"]:
                self.at("comparing the outputs")
                try:
                    checked = compare(ready.golden, named, ready.expected)
                except ValidationFailed as exc:
                    exc.golden = ready.seal if request["tensors"] is None else None
                    raise
                self.say("Golden validation: PASSED")
                self.at(f"compared {', '.join(checked)}: passed")
        except BaseException:
            writer.join()               # kept for a failed verdict too: its outputs are what to look at
            raise
        self.at("saving the outputs")
        writer.result()
        for i in range(1, runs):        # after the verdict, on fresh copies of the inputs (never accumulated)
            again = copies(pristine)
            self.at(f"timing the program (run {i + 1} of {runs})")
            began = time.perf_counter()
            execute(built, list(again.values()), config, kind=request["kind"], names=list(again),
                    say=lambda line: None)
            seconds.append(time.perf_counter() - began)
        from_golden = request["tensors"] is None
        return {"checked": checked, "dfx": dfx, "reads": ready.files, "golden": ready.seal if from_golden else None,
                "run_seconds": seconds, "outputs": list(named.values()) if not from_golden else None}


class _Background(threading.Thread):
    """`work(*args)` in a thread; `result` waits for it and raises what it raised."""

    def __init__(self, work: Callable, *args) -> None:
        super().__init__(name="pypto-build-save-outputs", daemon=True)
        self.work, self.args, self.error = work, args, None
        self.start()

    def run(self) -> None:
        try:
            self.work(*self.args)
        except BaseException as exc:        # noqa: BLE001 - raised again by join, in the run's thread
            self.error = exc

    def result(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


def _outputs(ready: "Ready", sub: Path) -> list[str]:
    """The tensors a run keeps: those it compared; else the parameters the sidecar says it writes (Out, InOut);
    else golden.py's `__outputs__`; else every tensor (nothing says which the program writes)."""
    import torch

    from ..builddir.sidecars import load_sidecar

    if ready.outputs:
        return list(ready.outputs)
    meta = load_sidecar(sub)
    written = [p.name for p in meta.params if p.direction in ("Out", "InOut")] if meta is not None else []
    if not written and ready.golden is not None:
        written = list(ready.golden.outputs)
    return [n for n, v in ready.named.items() if isinstance(v, torch.Tensor) and (not written or n in written)]


def _main(argv: list[str]) -> None:
    """`python -m pypto_build.run.child IN OUT`: the child, which leaves as a warm run does (`warm_server`): its
    exit handlers and the runtime's run, then the first registered leaves at once, without the interpreter's
    teardown of torch (a fifth of a second after every run)."""
    import atexit

    from ..core.exits import exit_now

    status = [1]                            # an exception escaping `_child`: printed, status 1
    atexit.register(lambda: exit_now(status[0]))
    _child(Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False))
    status[0] = 0


if __name__ == "__main__":
    _main(sys.argv[1:])
