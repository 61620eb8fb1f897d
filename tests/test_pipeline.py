"""One pipeline (issue 23, item 2): what the user asked -> plan -> caches -> engine -> result, in one place.

Every front end builds through `pipeline.run` with one `options.Request`: the API (build, validate,
replay, the program objects, the recipe), the `pypto-build` verbs and their doit commands, ci, watch,
example and debug/run.py. Planning and the caches are only ever asked of a Request (doit's own commands
too), the engine only by the pipeline; the platform is chosen once, the launcher found once and the
remote cache's URL parsed once per run.
"""
from __future__ import annotations

import ast
import argparse
from pathlib import Path

import pytest

import pypto_build
from pypto_build import pipeline
from pypto_build.errors import UserError
from pypto_build.options import Request
from pypto_build.testing import synth

PACKAGE = Path(pypto_build.__file__).parent


class Stopped(UserError):
    """What the spy raises once it has seen the request: the run goes no further."""


@pytest.fixture
def d(tmp_path) -> Path:
    return synth.write_l2(tmp_path / "d", kernels=2, golden=True)


@pytest.fixture
def runs(monkeypatch) -> list[dict]:
    """Every call of `pipeline.run`: its root, request and graph (the spy stops the run there)."""
    seen: list[dict] = []

    def spy(root, request, *, graph=None, progress=None, check=True):
        seen.append({"root": Path(root).resolve(), "request": request, "graph": graph})
        raise Stopped("stopped by the test's spy")

    monkeypatch.setattr(pipeline, "run", spy)
    return seen


def calls_of(name: str) -> list[str]:
    """The package's modules (test support aside) that call a function named `name`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(("testing/", "examples/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = getattr(node, "func", None)
            if isinstance(node, ast.Call) and name in (getattr(called, "id", None), getattr(called, "attr", None)):
                found.append(rel)
                break
    return found


def test_planning_and_the_caches_are_asked_of_a_request_and_the_engine_only_by_the_pipeline():
    assert calls_of("load_graph") == ["options.py"]
    assert calls_of("open_caches") == ["options.py"]
    assert calls_of("run_build") == ["pipeline.py"]


def test_the_api_builds_through_the_pipeline(d, runs):
    from pypto_build import build, rebuild_kernel_cpp_from_pto, replay, validate
    with pytest.raises(Stopped):
        build(d, jobs=2, recompile=True, keep_going=True)
    with pytest.raises(Stopped):
        validate(d, run_timeout=7)
    with pytest.raises(Stopped):
        replay(d)
    with pytest.raises(Stopped):
        rebuild_kernel_cpp_from_pto(d)
    built, validated, replayed, spliced = (r["request"] for r in runs)
    assert (built.jobs, built.recompile, built.keep_going, built.tasks) == (2, True, True, ())
    assert validated.tasks == ("validate",) and validated.run.timeout == 7
    assert replayed.tasks == ("replay",) and spliced.tasks == ("splice",)     # golden.py's inputs: the replay task
    assert {r["root"] for r in runs} == {d.resolve()}


def test_the_program_objects_build_through_the_pipeline(d, runs):
    torch = pytest.importorskip("torch")
    from pypto_build import CompiledProgram
    with pytest.raises(Stopped):
        CompiledProgram.from_dir(d)(torch.ones(16), torch.zeros(16))
    assert [r["root"] for r in runs] == [d.resolve()]


@pytest.mark.parametrize("argv, tasks, force", [
    (["build", "-j", "2", "--recompile"], (), ()),
    (["replay"], ("replay",), ()),
    (["replay", "--validate"], ("validate",), ("validate:",)),
    (["validate", "-q"], ("validate",), ()),
])
def test_the_verbs_and_their_doit_commands_build_through_the_pipeline(d, runs, argv, tasks, force):
    from pypto_build.cli.main import main
    from pypto_build.cli.doit_plugins import Build, Replay, Validate

    assert main([*argv, str(d)]) == 2                       # the spy's UserError: one line, exit 2
    doit = {"build": Build, "replay": Replay, "validate": Validate}[argv[0]]
    assert doit(config={}).parse_execute([*argv[1:], "--dir", str(d)]) == 2
    ours, theirs = runs
    assert ours["request"] == theirs["request"]             # one parse of the same options, either spelling
    assert (ours["request"].tasks, ours["request"].force) == (tasks, force)
    if argv[0] == "build":
        assert (ours["request"].jobs, ours["request"].recompile) == (2, True)


def test_debug_run_py_builds_through_the_pipeline(d, runs):
    from pypto_build.compat.runner_main import main
    assert main([str(d), "--validate"]) == 2
    assert runs[0]["request"].tasks == ("validate",) and runs[0]["root"] == d.resolve()


def test_ci_builds_each_directory_through_the_pipeline_on_its_plan(d, tmp_path, runs, capsys):
    from pypto_build.cli.main import main
    plain = synth.write_l2(tmp_path / "plain", kernels=1)
    assert main(["ci", "-j", "1", str(d), str(plain)]) == 1          # each directory failed (the spy), ci went on
    assert [r["root"] for r in runs] == [d.resolve(), plain.resolve()]
    validated, built = (r["request"] for r in runs)
    assert validated.tasks == ("validate",) and built.tasks == ()
    assert all(r["request"].keep_going and r["request"].jobs == 1 and r["graph"] is not None for r in runs)
    assert "stopped by the test's spy" in capsys.readouterr().err


def test_a_watch_round_builds_through_the_pipeline_on_its_warm_plan(d, runs):
    from pypto_build.options import request
    from pypto_build.watch import Session, Settings
    session = Session(d.resolve(), Settings(request({"jobs": 2})))
    report = session.round([])
    assert report.verdict == "BUILD FAILED" and "stopped by the test's spy" in report.detail
    assert len(runs) == 1 and runs[0]["graph"] is session.graph and runs[0]["request"].jobs == 2


def test_the_example_builds_through_the_pipeline(tmp_path, runs):
    from pypto_build.cli.main import main
    assert main(["example", str(tmp_path / "ex")]) == 2
    assert runs[0]["root"] == (tmp_path / "ex").resolve()
    assert runs[0]["request"].tasks == ("validate",) and runs[0]["request"].force == ("validate:",)


def test_doit_commands_and_explain_plan_through_a_request(d, monkeypatch, capsys):
    from pypto_build.cli.main import main
    planned: list[Request] = []
    real = Request.plan

    def spy(self, root, choice=None):
        planned.append(self)
        return real(self, root, choice)

    monkeypatch.setattr(Request, "plan", spy)
    assert main(["doit", "list", str(d), "--platform", "host"]) == 0
    assert main(["explain", "--recompile", str(d)]) == 0
    assert [(r.platform, r.recompile) for r in planned] == [("host", False), (None, True)]
    assert "would compile" in capsys.readouterr().out


def counting(monkeypatch, target, name: str, *where) -> list:
    """Count the calls of `target.name` (also where it was imported by name: `where`)."""
    real, calls = getattr(target, name), []

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    for module in (target, *where):
        monkeypatch.setattr(module, name, counted)
    return calls


def test_the_platform_is_chosen_once_per_run(d, monkeypatch):
    from pypto_build import build
    from pypto_build.plan import graph
    from pypto_build.platforms import choice
    chosen = counting(monkeypatch, choice, "choose", graph)
    build(d)                                        # a first build: planned
    assert len(chosen) == 1
    synth.kernel_path(d, 0).write_text(synth.kernel_path(d, 0).read_text() + "// edited\n")
    chosen.clear()
    assert build(d).compiled == ["compile:aic/main_incore_0_aic"]   # the no-op record asked, then planned
    assert len(chosen) == 1


def test_the_launcher_is_found_and_the_remote_url_parsed_once_per_run(d, monkeypatch):
    from pypto_build import build
    from pypto_build.toolchain import launcher
    from pypto_build.cache import remote_config
    found = counting(monkeypatch, launcher, "find")
    parsed = counting(monkeypatch, remote_config, "parse_url")
    result = build(d, launcher="env", remote_cache="http://127.0.0.1:9/cache")   # a launcher running the compiler
    # as it is given; nothing listens at the URL: one warning, a local build
    assert result.ok and len(found) == 1 and len(parsed) == 1


def test_a_request_from_flags_is_the_request_of_the_same_keywords(monkeypatch):
    from pypto_build.options import BUILD, RUN, add_to_parser, request
    parser = argparse.ArgumentParser()
    add_to_parser(parser, (*BUILD, *RUN))
    flags = request(parser.parse_args(["-j", "3", "-k", "--no-rebuild-from-pto", "--include-stale", "-q"]))
    given = Request.given(jobs=3, keep_going=True, rebuild_from_pto=False, include_stale=True, quiet=True,
                          run=flags.run)
    assert flags == given and flags.run.quiet and not flags.pto.enabled


def test_the_status_is_the_error_tree_s_for_the_error_check_raises(tmp_path):
    """issue 34 item 4: `BuildResult.status` is `errors.exit_status` of the very error `check=True` raises
    (a compile error: 1), 0 for a run that did all it was asked, and 2 for a run bad input stopped."""
    from pypto_build import build
    from pypto_build.errors import BuildError, LayoutError, exit_status

    root = synth.write_l2(tmp_path / "d", kernels=1)
    assert build(root).status == 0
    kernel = synth.kernel_path(root, 0)
    kernel.write_text(kernel.read_text() + "\nnot C++;\n")
    result = build(root, check=False)
    assert (result.status, result.ok) == (1, False)
    with pytest.raises(BuildError) as raised:
        build(root)
    assert exit_status(raised.value) == result.status and str(raised.value) == str(result.error())
    stopped = pipeline.BuildResult.stopped_by(root, LayoutError(f"{root}: not a build directory"))
    assert (stopped.status, stopped.ok) == (2, False)


def test_what_planning_says_goes_to_the_callers_progress_stream(d, capsys):
    """Issue 34 item 5: `build(progress=stream)` says the run's first line (the banner) on `stream`, as every
    other line of the run, not past it on sys.stdout."""
    import io
    from pypto_build import build

    stream = io.StringIO()
    build(d, progress=stream)
    said, printed = stream.getvalue(), capsys.readouterr().out
    assert said.startswith("pypto-build: platform host") and "compiled" in said
    assert printed == ""


def test_the_engine_keeps_no_record_of_its_own(d, tmp_path):
    """Issue 34 item 5: the no-op record is the pipeline's bookkeeping: the engine's run of a graph writes none;
    the pipeline's run (and `pypto-build doit run`) hands the engine its `Bookkeeping`, which do."""
    import os
    import subprocess
    import sys
    from conftest import age_tree
    from pypto_build.engine import BuildDirLoader, run_build

    request = Request.given(platform="host")
    other = synth.write_l2(tmp_path / "other", kernels=2, golden=True)
    for root in (d, other):
        pipeline.run(root, request, progress=None)
        age_tree(root)                  # settled: a whole clean run may now keep a record
    record = d / ".pypto_build" / "noop.marshal"
    graph = request.plan(d)
    assert run_build(BuildDirLoader(d, graph=graph, caches=request.caches(), run=request.run, quiet=True)) == 0
    assert not record.exists()
    pipeline.run(d, request, progress=None)
    assert record.exists()
    done = subprocess.run([sys.executable, "-m", "pypto_build", "doit", "run", str(other)], capture_output=True,
                          text=True, env={**os.environ, "PYPTO_BUILD_PLATFORM": "host"})
    assert done.returncode == 0, done.stderr
    assert (other / ".pypto_build" / "noop.marshal").exists()


def test_what_a_run_leaves_for_the_next_is_written_by_the_pipeline_alone():
    """Issue 34 item 5: the no-op record (removed, written), the header sets no unit names (pruned), the
    compiler's answers and the outside digests (kept) are written by `pipeline.Bookkeeping` alone."""
    assert [calls_of(name) for name in ("record_graph", "prune", "keep")] == [["pipeline.py"]] * 3
    assert calls_of("invalidate") == ["pipeline.py", "plan/noop.py"]      # noop.record removes it first too
    assert "pipeline.py" in calls_of("save") and "engine/session.py" not in calls_of("save")


class SpyBookkeeping:
    """The pipeline's records as the engine calls them: where and when."""

    def __init__(self, dep_file: Path):
        self.dep_file, self.calls = dep_file, []

    def before(self, root, platform):
        self.calls.append(("before", Path.cwd() == root, self.dep_file.exists()))

    def after(self, graph, tasks):
        self.calls.append(("after", Path.cwd() == graph.layout.root, tasks and len(tasks)))


def test_every_doit_command_calls_the_records_it_is_given_under_the_lock(d):
    """Issue 34 item 5: the engine does none of the pipeline's bookkeeping itself: it calls the `Bookkeeping` it is
    handed, in the root under the directory lock — `before` first, ahead of the state (so the no-op record is
    gone before anything can change), and, for a run that builds, `after` with doit's tasks when the run was
    whole and clean, else None; `forget` (which changes the state too) only `before`."""
    from pypto_build.cli.doit_commands import PipelineRun
    from pypto_build.engine import BuildDirLoader, BuildDirMain, run_build

    request = Request.given(platform="host")
    graph = request.plan(d)
    spy = SpyBookkeeping(BuildDirLoader(d, graph=graph).dep_file)
    loader = BuildDirLoader(d, graph=graph, caches=request.caches(), run=request.run, quiet=True, bookkeeping=spy)
    assert run_build(loader) == 0
    assert run_build(BuildDirLoader(d, graph=graph, caches=request.caches(), run=request.run, quiet=True,
                                    bookkeeping=spy), ["orch:main"]) == 0
    everything = len(loader.load_tasks(None, []))          # doit's tasks of the whole graph
    assert spy.calls == [("before", True, False), ("after", True, everything),
                         ("before", True, True), ("after", True, None)]
    spy.calls.clear()
    forget = BuildDirMain(BuildDirLoader(d, bookkeeping=spy), run=PipelineRun).run(["forget", "--platform", "host",
                                                                               "orch:main"])
    assert forget == 0 and spy.calls == [("before", True, True)]


def test_doit_run_builds_through_the_pipeline_with_doits_own_options(d, tmp_path, monkeypatch, capsys):
    """Issue 34 item 5: `pypto-build doit run DIR` is the pipeline's run (one Request: -n is its jobs, --continue
    its keep-going, task names its tasks); doit's options a build has no word for ride in `Request.doit` as
    parsed values, and the reporter they name shows the run while the pipeline's still collects it."""
    import json
    from pypto_build.cli.main import main

    seen: list[Request] = []
    real = pipeline.run

    def spy(root, request, **kwargs):
        seen.append(request)
        return real(root, request, **kwargs)

    monkeypatch.setattr(pipeline, "run", spy)
    monkeypatch.setenv("PYPTO_BUILD_PLATFORM", "host")
    report = tmp_path / "report.json"
    assert main(["doit", "run", str(d), "-n", "2", "--continue", "--reporter", "json", "-o", str(report),
                 "-v", "2", "orch:main"]) == 0
    (request,) = seen
    assert (request.tasks, request.jobs, request.keep_going) == (("orch:main",), 2, True)
    assert dict(request.doit) == {"reporter": "json", "outfile": str(report), "verbosity": 2}
    assert not request.may_skip
    assert [t["name"] for t in json.loads(report.read_text())["tasks"]] == ["orch:main"]
    assert "up to date" not in capsys.readouterr().out       # the pipeline's reporter only collected


def test_the_engine_overrides_no_underscore_method_of_doit():
    """Issue 34 item 5: the engine is a doit adapter through doit's public API: none of its classes overrides a
    method doit keeps private (`Run._execute`), and a build hands doit values, not an argv to parse again."""
    import importlib
    import inspect
    import pkgutil
    from pypto_build import engine
    from pypto_build.engine import commands

    modules = [importlib.import_module(f"{engine.__name__}.{m.name}") for m in pkgutil.iter_modules(engine.__path__)]
    overridden = sorted(f"{cls.__name__}.{name}" for module in modules for cls in vars(module).values()
                        if inspect.isclass(cls) and cls.__module__ == module.__name__
                        for name in vars(cls) if name.startswith("_") and not name.startswith("__")
                        and any(name in vars(base) for base in cls.__mro__[1:]
                                if base.__module__.startswith("doit.")))
    assert overridden == []
    assert "parse_execute" not in inspect.getsource(commands.run_build)


def test_whether_every_unit_is_forced_is_decided_in_one_place():
    """Issue 34 item 6: `--recompile` (or the invalidate_binary_cache() mark) is decided by
    `invalidation.forcing` alone — for the build, explain / --dry-run and the read-only answer; the mark itself
    (`pending`) is asked only by the no-op record's trust and by the build that moves it into its state."""
    assert sorted(set(calls_of("forcing"))) == ["engine/forcing.py"]      # the build, explain, the read-only answer
    assert sorted(set(calls_of("pending"))) == ["engine/forcing.py", "plan/invalidation.py", "plan/noop.py",
                                                "plan/noop_record.py"]
