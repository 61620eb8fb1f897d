"""Running is one stage with one entry (issue 34 item 1): every way of running a built program calls
`run.run_built`, and a verdict is recorded by one route (the `validate:` task), whoever asked for it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pypto_build
from conftest import copy_dir
from pypto_build.errors import ProgramFailed

PACKAGE = Path(pypto_build.__file__).parent
# What runs a program: the child's parent side, the runners' execution, the host executor, a runner's own runs.
ROUTES = {"in_child", "run_program", "execute", "save_outputs", "HostExecutor", "run_l2", "run_l3", "runner"}
# The run stage's entry and the two modules behind it (the child process, the platform's runner).
ENTRY = {"run/entry.py", "run/child.py", "run/execution.py"}


def _used_names(path: Path) -> tuple[set[str], set[str]]:
    """Every name `path` uses, reads as an attribute or imports (not its docstrings, not what it defines), and the
    run stage's modules behind the entry it imports from (`child`, `execution`)."""
    found: set[str] = set()
    behind: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            found |= {a.name for a in node.names}
            if "execute" in {a.name for a in node.names}:
                behind.add("execute")
            last = (node.module or "").split(".")[-1]
            if last in ("child", "execution") or (last == "run" and {a.name for a in node.names} & {"child",
                                                                                                  "execution"}):
                behind.add("run." + (last if last != "run" else "*"))
    return found, behind


def test_no_module_but_the_run_entry_runs_a_program():
    """Outside the platforms (the runners the entry drives) only the entry, its child and its execution name what
    runs a program: a caller that ran one another way (a fifth route) is named here."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("platforms/", "examples/")) or rel in ENTRY:
            continue
        names, behind = _used_names(path)
        hits = sorted(names & ROUTES)
        if hits == ["execute"]:     # also doit's command method and sqlite's: the run stage's is imported from `behind`
            hits = []
        hits += sorted(behind)
        if hits:
            offenders[rel] = hits
    assert offenders == {}


# -- every caller goes through the entry ------------------------------------------------------------------------

torch = pytest.importorskip("torch")


class Spy:
    """`run_built` as every caller reaches it: records the program, how it was asked to run, then fails the run
    as a crashed program would (the callers' own handling of a failed run is exercised too)."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, dict]] = []

    def __call__(self, program, **kw):
        self.calls.append((program, kw))
        raise ProgramFailed("spy: the program was not run")


@pytest.fixture
def spy(monkeypatch) -> Spy:
    from pypto_build.run import entry
    recorded = Spy()
    monkeypatch.setattr(entry, "run_built", recorded)
    return recorded


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def _inputs(root: Path) -> list:
    from pypto_build.run.golden import load_golden
    return [v for _n, v in load_golden(root).inputs()]


def test_replay_validate_and_the_tasks_run_through_the_entry(g, spy):
    from pypto_build import replay, validate

    with pytest.raises(ProgramFailed, match="spy"):             # golden.py's inputs: the replay: task
        replay(g, progress=None)
    with pytest.raises(ProgramFailed, match="spy"):             # ... the validate: task, its typed error raised
        replay(g, validate=True, progress=None)
    with pytest.raises(ProgramFailed, match="spy"):             # the caller's tensors: the entry, directly
        replay(g, *_inputs(g), progress=None)
    assert not validate(g, check=False).ok                      # the validate: task
    asked = [(p.path, p.kind.name, p.platform, kw.get("validate"), kw.get("tensors") is None, kw.get("loaded"))
             for p, kw in spy.calls]
    assert asked == [(g, "L2", "host", False, True, None), (g, "L2", "host", True, True, None),
                     (g, "L2", "host", False, False, None), (g, "L2", "host", True, True, None)]


def test_the_program_objects_and_benchmark_run_through_the_entry(g, spy):
    from pypto_build import CompiledProgram, benchmark
    from pypto_build.run import Loaded

    prog = CompiledProgram.from_dir(g)
    with pytest.raises(ProgramFailed, match="spy"):
        prog(*_inputs(g))
    with pytest.raises(ProgramFailed, match="spy"):
        benchmark(prog, _inputs(g), rounds=3, warmup=1)
    (first, a), (second, b) = spy.calls
    assert first == second and (first.path, first.kind.name, first.platform) == (g, "L2", "host")
    assert isinstance(a["loaded"], Loaded) and a["loaded"] is b["loaded"]      # in process, kept loaded
    assert (a["timing_runs"], b["timing_runs"]) == (1, 4)


def test_the_distributed_program_runs_through_the_entry(l3, spy):
    from pypto_build import DistributedCompiledProgram

    program = DistributedCompiledProgram.from_dir(l3, platform="host")
    meta = program.meta
    tensors = [torch.zeros([d if d > 0 else 1 for d in p.shape], dtype=getattr(torch, _dtype(p.dtype)))
               for p in meta.params]
    with pytest.raises(ProgramFailed, match="spy"):
        program(*tensors)
    ((p, kw),) = spy.calls
    assert (p.path, p.kind.name, p.platform, kw["device_ids"]) == (l3, "L3", "host", program.device_ids)


def _dtype(name: str) -> str:
    from pypto_build.compat.runner import torch_dtype_name
    return torch_dtype_name(name)[len("torch."):]


def test_a_watch_round_runs_through_the_entry(g, spy, tmp_path):
    from pypto_build.watch.rounds import Session, Settings
    import io

    session = Session(g, Settings(runs=3), out=io.StringIO())
    report = session.round([])
    ((p, kw),) = spy.calls
    assert (p.path, p.kind.name, p.platform) == (g, "L2", "host")
    assert kw["start"] == session.starter.start and kw["timing_runs"] == 3 and kw["validate"] is True
    assert report.verdict == "CRASHED" and "spy" in report.detail


# one watch round with --validate, in a process of its own (its warm run server goes with it); its status
WATCH_ROUND = ("import sys; from pathlib import Path; from pypto_build.core.exits import guarded; "
               "from pypto_build.options import request; from pypto_build.watch import Settings, watch; "
               "sys.exit(guarded(lambda: watch(Path(sys.argv[1]), Settings(request({}), validate=sys.argv[2] == "
               "'validate', runs=2), rounds=1)))")


def _watch_round(root: Path, validate: bool = True) -> tuple[int, list[str]]:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WATCH_ROUND, str(root), "validate" if validate else "run"],
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


@pytest.mark.slow
def test_a_passed_watch_round_is_the_verdict_validate_reuses(g):
    """A watch round validates through the pipeline's `validate:` task: its PASSED verdict is recorded as every
    verdict is, so `pypto-build validate` then says it holds and runs nothing; the round's block is as before
    (the verdict, the timed runs, the split of its time)."""
    import subprocess
    import sys
    from pypto_build import validate

    status, lines = _watch_round(g)
    assert status == 0 and "   verdict  PASSED (out)" in lines, lines
    assert any(line.startswith("   program  ") and "median of 2" in line for line in lines), lines
    (split,) = [line for line in lines if line.startswith("   time     ")]
    assert [part.split()[0] for part in split[len("   time     "):].split(" · ")] == \
        ["compile", "run", "compare", "start", "round"], split
    said = subprocess.run([sys.executable, "-m", "pypto_build", "validate", str(g)], capture_output=True, text=True,
                          timeout=300)
    assert said.returncode == 0 and "validate:.  Golden validation: PASSED (cached" in said.stdout, said.stdout
    result = validate(g)
    assert result.names("up-to-date", "validate:") == ["validate:."] and result.names("ran") == []


@pytest.mark.slow
def test_a_failed_watch_round_records_no_verdict(g):
    """A FAILED round leaves no verdict: `validate` runs the program again (and fails as the round did)."""
    from pypto_build import validate
    from pypto_build.testing import synth

    kernel = synth.kernel_path(g, 1)
    kernel.write_text(kernel.read_text().replace("out[i] * 0.5f", "out[i] * 0.25f"))
    status, lines = _watch_round(g)
    assert status == 1 and any(line.startswith("   verdict  FAILED: Output 'out'") for line in lines), lines
    result = validate(g, check=False)
    assert result.names("failed") == ["validate:."] and not result.names("up-to-date", "validate:")


@pytest.mark.slow
def test_a_watch_round_that_only_runs_records_no_verdict(g):
    """Without --validate a round runs the pipeline's `replay:` task (the same rule, no comparison): RAN, timed,
    its outputs kept; no verdict, so `validate` runs the program."""
    from pypto_build import validate

    status, lines = _watch_round(g, validate=False)
    assert status == 0 and "   verdict  RAN" in lines, lines
    assert any(line.startswith("   program  ") and "median of 2" in line for line in lines), lines
    assert (g / ".pypto_build" / "replay" / "out.pt").is_file()
    assert validate(g).names("ran", "validate:") == ["validate:."]


def test_a_run_kept_in_process_is_refused_to_doit_workers():
    """`InProcess` (a warm start, callbacks, the slot the run is handed back in) lives in this process: a request
    that would send the run task to doit's worker processes (-j > 1) refuses it in one line."""
    from dataclasses import replace
    from pypto_build.builddir.runconfig import InProcess, RunSpec
    from pypto_build.errors import ArgumentError
    from pypto_build.options import Request

    kept = RunSpec(in_process=InProcess())
    assert replace(Request(), jobs=1, run=kept).run.in_process is kept.in_process
    with pytest.raises(ArgumentError, match=r"jobs=1"):
        replace(Request(), jobs=2, run=kept)
    assert RunSpec() == replace(kept, in_process=None) == kept        # never part of what a spec is


def test_only_what_plans_nothing_classifies_a_directory():
    """Issue 34 item 7: the layout's kind travels in the plan (`Program`; `run.runnable` reads the planned layout),
    so what classifies a directory is the layout itself and the verbs that plan nothing: `history` and `cache stats
    DIR` (is it a build directory at all: cli/state_report.py), `emit-runner` (debug/run.py from the sidecar) and
    `bisect`, which refuses what is no build directory before it copies it to plan the copy (culprits/hunt.py)."""
    users = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                   if "classify" in _used_names(path)[0])
    assert users == ["builddir/layout.py", "cli/state_report.py", "compat/runner.py", "culprits/hunt.py"]


@pytest.mark.slow
def test_the_binaries_a_run_loads_are_data(g, tmp_path):
    """The entry runs the binaries it is handed: a scratch copy's (a kernel changed there) against the program's
    own golden.py, through the same entry — no other route is needed to run mixed binaries."""
    from pypto_build import build
    from pypto_build.builddir.layout import BuildKind
    from pypto_build.errors import ValidationFailed
    from pypto_build.plan.program import Binaries, Program
    from pypto_build.run import run_built
    from pypto_build.testing import synth

    scratch = copy_dir(g, tmp_path / "scratch")
    kernel = synth.kernel_path(scratch, 1)
    kernel.write_text(kernel.read_text().replace("0.5f", "0.75f"))
    build(scratch)
    program = Program(g, BuildKind.L2, "host")
    quiet = dict(validate=True, say=lambda _line: None)
    assert run_built(program, **quiet).checked == ["out"]                               # its own binaries
    with pytest.raises(ValidationFailed, match="Output 'out' does not match golden"):
        run_built(program, binaries=Binaries(scratch), **quiet)                         # the scratch copy's


def _recorded_verdict(root: Path) -> dict:
    """What doit keeps for `validate:.` in the directory's host state."""
    from pypto_build.builddir.state_dir import STATE_DB, state_folder
    from pypto_build.engine import open_state

    state = open_state(root / state_folder("host") / STATE_DB, adopt=False, read_only=True)
    try:
        return dict(state.get_values("validate:."))
    finally:
        state.close()


@pytest.mark.slow
def test_a_watch_rounds_verdict_is_recorded_as_the_one_shot_records_it(g):
    """The warm, in-process route (a watch round: warm start, timing runs, phase callbacks) records exactly the
    values a cold one-shot `replay --validate` records for the same binaries and golden result."""
    import subprocess
    import sys

    status, lines = _watch_round(g)
    assert status == 0 and "   verdict  PASSED (out)" in lines, lines
    warm = _recorded_verdict(g)
    done = subprocess.run([sys.executable, "-m", "pypto_build", "replay", "--validate", str(g)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout
    cold = _recorded_verdict(g)
    assert warm["verdict"] == "PASSED" and warm == cold
