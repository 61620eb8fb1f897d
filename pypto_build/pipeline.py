"""The one pipeline: what the user asked (`options.Request`) -> plan -> caches -> engine -> `BuildResult`.

Every front end builds through `run()`: the API (`build`, `validate`, `replay` and
the program objects), the `pypto-build` verbs and their doit commands, `pypto-build doit
run`, `ci`, `watch`, `example` and `debug/run.py` (`pypto-build doit <command>` plans through the
same `Request` stages, then runs doit's own command: engine/loader.py). What a run leaves for the
next besides doit's state is the pipeline's too (`Bookkeeping`: the engine calls them under the lock). `run` chooses
the platform once, lets the no-op record answer when it may (only after the refusals
the rest of the run would make: `noop.refuse`), plans, opens the caches, runs the
engine (`engine.run_build`: `--recompile` and the other forcing are applied there,
once) and collects what happened. The outcome is decided once: `BuildResult.error()` is
the run as the error tree says it, `BuildResult.status` its exit status (`errors.exit_status`),
which every front end returns; what stops a run is raised as errors.py says it (a front end
that goes on past it, as `ci` and `watch` do, keeps it in `BuildResult.stopped_by`).
"""
from __future__ import annotations

import io
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .core import stages
from .errors import OK, BuildError, UserError, exit_status
from .options import Request

if TYPE_CHECKING:
    from .plan.graph import Graph
    from .run import RunAhead

_one_run = threading.Lock()   # doit keeps globals and we chdir: one run per process at a time


@dataclass(frozen=True)
class UnitResult:
    """What happened to one task: status is ran, up-to-date, failed or skipped."""

    task: str
    status: str
    reason: str = ""
    seconds: float = 0.0
    message: str = ""

    @property
    def headline(self) -> str:
        """The message's first line: file, what is wrong, how to fix it (details follow it)."""
        return self.message.partition("\n")[0]


@dataclass(frozen=True)
class BuildResult:
    """What one run did: per task its status and reason (`units`), the run's exit status, what planning
    and the `.pto` stage had to say (`warnings`), the kernel files re-spliced from `.pto`, the `.pto`
    units whose edits could not be applied and those never seen edited that ptoas could not compile (their
    kernels built as they are), and the compile units that ran but built the very bytes already in place
    (`identical`: their files were kept, so `ls -l` shows them untouched — after `--recompile` or
    `invalidate_binary_cache()`, say; also in `compiled`). `ok`: the run succeeded and every validation it
    ran to make was made (`not_validated`: the ones skipped, e.g. after `doit ignore`); `failures` the
    failed tasks; `status` the exit status every front end gives for it (0, 1, 2 or 130)."""

    work_dir: Path
    platform: str
    units: tuple[UnitResult, ...]
    returncode: int
    warnings: tuple[str, ...] = field(default=())
    spliced: tuple[str, ...] = field(default=())        # kernel files re-spliced from .pto
    not_applied: tuple[str, ...] = field(default=())    # .pto units whose edits were not applied
    banner: str = ""        # the run's first line: platform (and why, when not the recorded one), runtime, PTO-ISA
    pto_rejected: tuple[str, ...] = field(default=())   # unedited .pto ptoas could not compile: kernels kept
    identical: tuple[str, ...] = field(default=())      # compiled units whose bytes were already in place
    doit_errors: tuple[str, ...] = field(default=())    # doit's own lines when it did not complete the run
    stopped: BaseException | None = None    # what stopped the run before it had a result (`stopped_by`)
    runs: tuple[tuple[str, str], ...] = field(default=())   # the plan's programs (`programs`), as plain data
    ran: dict = field(default_factory=dict, compare=False)   # run task -> what its run did (`run_of`)

    @property
    def programs(self) -> tuple:
        """The programs this build can run (`plan.program.Program`: directory, layout kind, platform), as the
        plan found them — also when the no-op record answered (it keeps them): no stage classifies again."""
        from .plan.program import decode
        return decode(self.work_dir, self.platform, self.runs)

    def program(self):
        """The one program of an L2 or L3 build directory (a multi-orch parent has one per sub-build)."""
        found = [p for p in self.programs if p.path == self.work_dir]
        if not found:
            raise UserError(f"{self.work_dir} is a multi-orchestration parent; run one of its sub-builds instead: "
                            + ", ".join(str(p.path) for p in self.programs))
        return found[0]

    def run_of(self, task: str) -> dict | BaseException | None:
        """What the run of `task` (a `replay:`/`validate:` task that ran) did: its kept outcome (outputs
        compared, diagnostics written) or the error tree's exception it failed with; None when it did not run."""
        return self.ran.get(task)

    @classmethod
    def stopped_by(cls, work_dir: Path | str, exc: BaseException, platform: str = "") -> BuildResult:
        """The result of a run `exc` stopped (bad input, an interrupt), for a front end that goes on past it
        (ci's next directory, watch's next round): nothing ran, its status is the error tree's for `exc`."""
        return cls(Path(work_dir), platform, (), 0, stopped=exc)

    def error(self) -> BaseException | None:
        """This run as the error tree says it; None when it did all it was asked. What stopped it, else a
        `BuildError` for a failed unit, a run doit did not complete or a validation not made: the error
        `run(check=True)` raises, and the one `status` maps."""
        if self.stopped is not None:
            return self.stopped
        if self.failures:
            first = self.failures[0]
            return BuildError(f"{len(self.failures)} unit(s) failed; first: {first.task}: {first.headline}",
                              list(self.failures), self)
        if self.returncode != 0:
            return BuildError(f"{self.work_dir}: build did not complete (doit exit status {self.returncode}): "
                              f"{'; '.join(self.doit_errors)}", [], self)
        if self.not_validated:
            return BuildError(f"{self.work_dir}: not validated: {self.why_not_validated()[0]}", [], self)
        return None

    @property
    def status(self) -> int:
        """The exit status of this run, the same from every front end (build, replay, validate, a `ci`
        directory, a `watch` round, `example`, the doit commands, the API): `errors.exit_status` of
        `error()` — 0 all done, 1 a unit or a validation failed or was not made, 2 bad input, 130 interrupted."""
        error = self.error()
        return OK if error is None else exit_status(error)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def not_validated(self) -> list[str]:
        """Validation tasks that were skipped (`doit ignore`, a unit they depend on failed): no verdict."""
        return self.names("skipped", stages.prefix(stages.VALIDATE))

    def why_not_validated(self) -> list[str]:
        """Per skipped validation, one line: the task, why, and how to have it run."""
        lines = []
        for u in self.units:
            if u.task in self.not_validated:
                fix = (f"`pypto-build doit forget {self.work_dir} {u.task}` makes it run again"
                       if "doit ignore" in u.reason else "fix what it depends on and run again")
                lines.append(f"{u.task}: {u.reason or 'skipped'}; nothing was compared — {fix}")
        return lines

    def names(self, status: str, prefix: str = "") -> list[str]:
        """Task names with `status`, optionally only those starting with `prefix`."""
        return sorted(u.task for u in self.units if u.status == status and u.task.startswith(prefix))

    @property
    def compiled(self) -> list[str]:
        """Compile and orchestration tasks that ran."""
        return [n for n in self.names("ran") if n.startswith(stages.UNITS)]

    @property
    def from_cache(self) -> list[str]:
        """Compile and orchestration tasks whose binary was restored from the artefact cache."""
        return self.names("from-cache")

    @property
    def failures(self) -> list[UnitResult]:
        return [u for u in self.units if u.status == "failed"]


def run(root: Path | str, request: Request, *, graph: Graph | None = None, progress: TextIO | None = None,
        check: bool = True) -> BuildResult:
    """Run `request` on the build directory at `root`: plan (unless `graph` is the plan already: a watch's
    warm one, or a test's fake platform), open the caches, run the engine, return what happened.

    `progress`: a stream for one line per task run and a summary (None: silent; `request.quiet`: only
    verdicts and `.pto` edits not applied). With `check`, a failed task, an incomplete run or a
    validation not made raises `BuildError` (with the partial result); bad input raises a `UserError`, also
    when the replay child is the one to refuse it (a task's `run.Refused`), whatever `check` says.
    """
    if graph is None:
        root = Path(root).resolve()
        choice = None
        if request.may_skip:
            from .plan import noop
            from .platforms import cannot_serve, choose
            choice = choose(root, request.platform, cannot_serve=cannot_serve)      # chosen once, used by plan
            hit = noop.check(root, lambda: noop.key(choice.name, request.pto.enabled, request.pto.ptoas),
                             lambda: noop.refuse(root, choice.name, request))      # as the full path would
            if hit is not None:
                return _noop_result(root, choice.name, hit, None if request.quiet else progress)
        graph = request.plan(root, choice)
    return _run_engine(graph, request, progress, check)


class Bookkeeping:
    """The pipeline's work around a run, handed to the engine (`BuildDirLoader(bookkeeping=...)`) and called under
    the directory lock, for the pipeline's runs and for every `pypto-build doit` command: what a run leaves for
    the next one besides doit's state, and the runs begun while the compiler runs (`ahead`, a `run.RunAhead`)."""

    def __init__(self, ahead: RunAhead | None = None) -> None:
        self.ahead = ahead

    def before(self, root: Path, platform: str) -> str | None:
        """Every command, before anything can change the state: the no-op record is removed, whatever follows
        (a run that dies half way leaves none that says "nothing to do"; a whole clean build writes it again),
        and the one state of before is taken over for `platform` (`_take_over`); the line that says so. Then the
        runs to begin ahead begin (under the lock: their children may keep golden.py's result)."""
        from .plan import noop
        noop.invalidate(root)
        said = _take_over(root, platform)
        if self.ahead is not None:
            self.ahead.begin()
        return said

    def after(self, graph: Graph, tasks: list | None) -> None:
        """After a run that builds (it ended without raising): with `tasks` (a whole, clean build) the platform's
        header-set records no unit names any more go and the no-op record is written (`plan.noop.record_graph`:
        when the graph may keep one); then the compiler's answers planning asked for (`search_dirs`) and the
        digests of files outside the directory (`hashing.keep`) are kept."""
        import functools
        from . import options
        from .builddir.state_dir import STATE_DIR, current_state_folder
        from .compile import header_sets
        from .core import hashing
        from .plan import noop
        from .toolchain import search_dirs

        root = graph.layout.root
        if tasks is not None:
            sets = header_sets.named(t.values for t in tasks)
            header_sets.prune(root, sets, current_state_folder(root, graph.platform.name))
            noop.record_graph(graph, tasks, functools.partial(options.request, {}), sets)  # what `build DIR` asks
        search_dirs.save(root)
        hashing.keep(root, root / STATE_DIR)


BOOKKEEPING = Bookkeeping()


def _take_over(root: Path, platform: str) -> str | None:
    """Move the one state of before (`.pypto_build/state.sqlite3`, its journal and its header sets) into
    `platform`'s folder when that has none: moved, not copied, under the lock before the state opens — its
    rows decide by content as always (a unit built last for another platform rebuilds once). The line that
    says so, or None when there was nothing to take over."""
    import os
    from .builddir.state_checks import SIDE_FILES, check_state_files
    from .builddir.state_dir import STATE_DB, STATE_DIR, state_folder
    from .compile.header_sets import sets_dir

    legacy = root / STATE_DIR / STATE_DB
    folder = root / state_folder(platform)
    if not os.path.lexists(legacy) or os.path.lexists(folder / STATE_DB):
        return None
    check_state_files(legacy)
    folder.mkdir(parents=True, exist_ok=True)
    headers, own_headers = root / sets_dir(STATE_DIR), root / sets_dir(state_folder(platform))
    if headers.is_dir() and not os.path.lexists(own_headers):
        os.rename(headers, own_headers)           # first: a kill before the database moves re-takes both
    for side in SIDE_FILES:                       # a journal goes with its database (sqlite rolls it back there)
        if os.path.lexists(f"{legacy}{side}"):
            os.replace(f"{legacy}{side}", folder / f"{STATE_DB}{side}")
    os.replace(legacy, folder / STATE_DB)
    return (f"pypto-build: the build state is now kept per platform; {STATE_DIR}/{STATE_DB} moved to "
            f"{state_folder(platform)}/ (units built last for another platform rebuild once)")


def _run_engine(graph: Graph, request: Request, progress: TextIO | None, check: bool) -> BuildResult:
    """The caches and the engine on a planned graph, and the result (raised with `check` when not ok)."""
    from .builddir.runconfig import InProcess
    from .engine import BuildDirLoader, BuildReporter, run_build
    from .run import for_request

    root = graph.layout.root
    quiet = request.quiet or progress is None
    (banner, *said), warned = graph.notices()
    if not quiet:                       # what planning has to tell, to the caller's stream (warnings: stderr)
        for line in (banner, *said):
            print(line, file=progress)
        for line in warned:
            print(line, file=sys.stderr)
    reporter = BuildReporter(progress or io.StringIO(), quiet=quiet or request.doit_reports, echo_errors=False)
    ahead = for_request(graph, request.tasks, request.force, request.jobs, request.run)   # begun while compiling
    if ahead is not None:
        here = request.run.in_process or InProcess()
        here.ahead = ahead
        request = replace(request, run=replace(request.run, in_process=here))
    loader = BuildDirLoader(root, graph=graph, caches=request.caches(), run=request.run, reporter=reporter,
                            quiet=quiet, force=request.force, bookkeeping=Bookkeeping(ahead), progress=progress)
    with _one_run:
        try:
            rc = run_build(loader, list(request.tasks), jobs=request.jobs, recompile=request.recompile,
                           keep_going=request.keep_going, doit=request.doit)
        finally:
            if ahead is not None:
                ahead.close()
                here.ahead = None
    if request.trace is not None:
        from .engine import write_trace
        write_trace(reporter.spans, Path(request.trace))
    units = tuple(UnitResult(name, o.status, o.reason, o.seconds, o.message)
                  for name, o in sorted(reporter.outcomes.items()))
    warnings = [*said, *reporter.warnings, *reporter.stage_warnings(), *warned]
    from .plan.program import programs
    ran = {**{name: v["run"] for name, v in reporter.values.items() if "run" in v}, **reporter.raised}
    kept = reporter.tallied             # what the stages tallied (pto/stage.py, compile/stage.py)
    result = BuildResult(root, graph.platform.name, units, rc, tuple(warnings), tuple(kept("spliced")),
                         tuple(kept("not_applied")), banner, tuple(kept("pto_rejected")),
                         tuple(sorted(kept("identical"))), tuple(reporter.errors),
                         runs=tuple(p.encode(root) for p in programs(graph)), ran=ran)
    if reporter.refused:                # the input refused while running (as planning would): a user error
        raise UserError(reporter.refused[0])
    error = result.error() if check else None
    if error is not None:
        raise error
    return result


def _noop_result(root: Path, platform: str, hit: dict, progress: TextIO | None) -> BuildResult:
    """The result of a run the no-op record answered: every task up to date, nothing loaded."""
    from .plan.noop_record import said
    names = list(hit.get("tasks") or [])
    lines = list(hit.get("lines") or [])
    if progress is not None:
        print("\n".join(said(hit)), file=progress, flush=True)
    return BuildResult(root, platform, tuple(UnitResult(n, "up-to-date", "no-op record") for n in sorted(names)),
                       0, tuple(lines[1:]), banner=lines[0] if lines else "",
                       runs=tuple(tuple(r) for r in hit.get("runs") or ()))
