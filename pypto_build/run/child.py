"""Run a built directory's program in a child process: a crash or a hang is a failed run, not a dead tool.

`in_child()` (the parent side; called by the run stage's entry, `entry.run_built`) starts
`python -P -m pypto_build.run.child` in its own session, sends it a request, prints the lines it sends back, and
returns an outcome only when the child said so explicitly. Anything else is a
failure naming the program and what was running: a signal (segfault, abort), an
exit status (`exit()` in a kernel, `sys.exit()` in golden.py), a timeout
(`PYPTO_RUN_TIMEOUT`, `--run-timeout`) or the user's Ctrl-C / SIGTERM. The
child's whole process group (L3 rank workers included) is killed on every way
out, and the child dies with its parent.

The child (`_child()`) loads golden.py, generates the inputs (or takes the
caller's tensors), snapshots them, runs the program on the host runtime, keeps
the outputs under `.pypto_build/replay/`, and validates against the snapshot.
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
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..core import pipes, procs
from .starter import spawn
from .reads import Reads
from ..errors import ArgumentError, ProgramFailed, PyptoBuildError, UserError, ValidationFailed, one_line
from ..builddir.markers import DFX_OUTPUTS
from ..builddir.runconfig import RunConfig
from ..core.safeio import refusal

if TYPE_CHECKING:
    from ..plan.program import Binaries, Program

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


def in_child(program: Program, binaries: Binaries, config: RunConfig, *, validate: bool,
             timeout: float = DEFAULT_TIMEOUT, say: Callable[[str], None] = print, tensors: Sequence | None = None,
             names: Sequence[str] | None = None, start: Callable | None = None, timing_runs: int = 1,
             on_phase: Callable[[str], None] | None = None, quiet: bool = False) -> RunOutcome:
    """Run `program` (loading `binaries`) in a child process (inputs from golden.py, or `tensors`); raise on any
    failure. `config` names the platform already (`entry.run_built` put it there).

    `start` starts the process (`starter.spawn`, a new interpreter, by default; `starter.WarmStarter.start`
    forks a warm one); `timing_runs` runs the program that many times (fresh inputs each time) and reports
    each run's seconds; `on_phase` hears what the child is doing as it starts each step. With `quiet` (-q)
    the child says only the verdict and the program's own log lines, none of its progress.

    Raises ProgramFailed (crash, exit, timeout), GoldenError/NothingCompared, ExecutorError, or
    AssertionError for an output that does not match — the same types the in-process steps raise.
    """
    sub_dir = Path(program.path).resolve()
    _check_data(sub_dir)
    started = (start or spawn)(sub_dir, _child)
    request = {"sub": str(sub_dir), "kind": program.kind, "binaries": str(Path(binaries.where).resolve()),
               "config": config, "validate": validate, "names": list(names or []),
               "tensors": None if tensors is None else list(tensors), "sys_path": list(sys.path),
               "parent": started.parent, "timing_runs": timing_runs, "quiet": quiet}
    inbox, outbox = started.inbox, started.outbox
    what = f"the program of {sub_dir}"
    doing = "starting"
    try:
        try:
            outbox.send_bytes(pickle.dumps(request))
        except OSError:
            pass                                   # the child died at once: its exit status says how
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
        inbox.close()
        started.stop()


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
    pipes.guard()               # what the program prints goes to our stdout: a reader gone stops nothing
    request = pickle.loads(inbox.recv_bytes())
    procs.die_with_parent(request["parent"])
    sys.path[:] = request["sys_path"]

    def send(kind: str, payload) -> None:
        outbox.send_bytes(pickle.dumps((kind, payload)))

    try:
        send("done", _run(request, send))
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


def _run(request: dict, send: Callable[[str, object], None]) -> dict:
    from ..builddir.layout import BuildKind
    from ..platforms import implementation

    sub, built = Path(request["sub"]), Path(request["binaries"])
    kind: BuildKind = request["kind"]               # L2 or L3: the plan's (classified once, by the layout)
    config: RunConfig = request["config"]
    if kind is BuildKind.L3:                        # e.g. the rank workers' server: its imports overlap ours
        implementation(config.platform or "host").runner().prepare_l3()
    send("at", "importing torch")
    from .golden import compare, copies, load_golden, require_run_extra
    require_run_extra()                 # every run needs torch (golden.py's tensors, the runtime): say so first
    from . import golden_cache
    from ..builddir.sidecars import load_sidecar
    from .execution import execute, save_outputs
    reads = Reads(sub)

    def at(what: str) -> None:
        Reads.doing = what
        send("at", what)

    say = (lambda line: send("line", line))
    note, said_by_run = say, say                    # progress: ours, and the platform's `[execute] ` lines
    if request.get("quiet"):
        note = (lambda line: None)
        said_by_run = (lambda line: None if line.startswith(PROGRESS) else say(line))
    tensors, names = request["tensors"], request["names"]
    from_golden = tensors is None                   # only a result of golden.py's own inputs is kept
    golden = cached = taken = None
    if tensors is None or request["validate"]:
        at("looking up the cached golden result")
        cached, stale = golden_cache.lookup(sub)
        if cached is not None and not from_golden and not cached.same_inputs(tensors):
            cached, stale = None, None              # the caller's own inputs: compute_golden runs on them
        if cached is not None:
            note(f"golden: cached (computed {cached.when}); golden.py not run")
            golden, pairs = cached.golden(), list(zip(cached.names, cached.inputs))
        else:
            if stale and request["validate"] and from_golden:
                note(f"golden: computing again ({stale})")
            taken = golden_cache.before(sub)
            at("loading golden.py")
            with reads:
                golden = load_golden(sub)
                at("calling golden.py generate_inputs()")
                pairs = golden.inputs()
        if tensors is None:
            golden.check_inputs(pairs, load_sidecar(sub))
            names, tensors = [n for n, _ in pairs], [v for _, v in pairs]
        elif len(pairs) != len(tensors):
            raise ArgumentError(f"replay(validate=True): expected {len(pairs)} tensors (orchestration parameter "
                                f"count from {sub}/golden.py), got {len(tensors)}")
        else:
            names = [n for n, _ in pairs]
    named = dict(zip(names or [f"arg{i}" for i in range(len(tensors))], tensors))
    outputs: list[str] = []
    snapshot: dict = {}
    if request["validate"]:
        outputs = golden.check_outputs(list(named), named, load_sidecar(sub))
        if cached is None:
            snapshot = copies(named)          # untouched by the run
    runs = max(1, int(request.get("timing_runs") or 1))
    pristine = copies(named) if runs > 1 else {}
    at(f"running the program on {config.platform}")
    began = time.perf_counter()
    dfx = execute(built, tensors, config, kind=kind, names=list(named), say=said_by_run,
                  on_task=lambda what: at(f"running {what}"))
    seconds = [time.perf_counter() - began]
    note(f"Replay finished. DFX artefacts (if any) under {built / DFX_OUTPUTS}")
    at("saving the outputs")
    save_outputs(sub, named)
    checked: list[str] = []
    kept = cached.seal if cached is not None else None
    if request["validate"]:
        if cached is not None:
            expected = cached.expected
        else:
            at("calling golden.py compute_golden()")
            with reads:
                expected = golden.expected(snapshot, outputs)
            if from_golden:
                at("keeping the golden result")
                kept = _keep_golden(note, sub, golden, names, snapshot, expected, reads, taken)
        at("comparing the outputs")
        checked = compare(golden, named, expected)
        say("Golden validation: PASSED")
        at(f"compared {', '.join(checked)}: passed")
    for i in range(1, runs):               # after the verdict, on fresh copies of the inputs (never accumulated)
        again = copies(pristine)
        at(f"timing the program (run {i + 1} of {runs})")
        began = time.perf_counter()
        execute(built, list(again.values()), config, kind=kind, names=list(again), say=lambda line: None)
        seconds.append(time.perf_counter() - began)
    return {"checked": checked, "dfx": dfx, "reads": _keyed_files(sub, cached, taken, reads),
            "golden": kept if from_golden else None,
            "run_seconds": seconds, "outputs": tensors if request["tensors"] is not None else None}



def _keep_golden(say: Callable[[str], None], sub: Path, golden, names: list[str], snapshot: dict, expected: dict,
                 reads: "Reads", taken) -> str | None:
    """Store golden.py's result for the next run (golden_cache): its seal, or None when it was not kept (a file
    system that refuses only costs that)."""
    from . import golden_cache

    try:
        seal, why = golden_cache.save(sub, golden, names, snapshot, expected, taken, reads.paths(),
                                      reads.imported | golden_cache.modules_of(golden.module), reads.environ)
    except OSError as exc:
        seal, why = None, one_line(str(exc), 200)
    if why:
        say(f"golden: result not cached ({why})")
    return seal


def _keyed_files(sub: Path, cached, taken, reads: "Reads") -> list[str]:
    """The files golden.py's result is keyed on: the kept entry's, or what it read and the sub-build's own."""
    if cached is not None:
        return cached.files
    if taken is None:
        return []
    return sorted({*reads.paths(), *(str(sub / rel) for rel in taken.files)})


if __name__ == "__main__":
    _child(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
