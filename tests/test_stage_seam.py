"""Issue 34 items 3 and 6: a stage owns its tasks, its report and its explanation; the engine assembles the
stages it is given and names none; explain / --dry-run are the build's own decisions (a dry run of doit)."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

import pypto_build
from conftest import edit
from pypto_build import build_stages
from pypto_build.api import build
from pypto_build.core import stages
from pypto_build.core.stage_seam import Done, Stage
from pypto_build.engine import BuildDirLoader, BuildReporter, run_build
from pypto_build.engine.explanation import explain, format_lines
from pypto_build.options import Request
from pypto_build.testing import synth

ENGINE = Path(pypto_build.__file__).parent / "engine"


def lint_action() -> dict:
    return {"lint": "clean"}


def lint_tasks(graph, _caches, _run) -> dict[str, list[dict]]:
    """One `lint:` task per sub-build, after its stamp, on its binaries (a stage the engine was never told
    about)."""
    return {"lint": [{"name": p.sub.name, "actions": [(lint_action, [])],
                      "task_dep": [stages.task(stages.STAMP, p.sub.name)],
                      "file_dep": [u.output for u in p.units]} for p in graph.plans]}


LINT = Stage(groups=("lint",), tasks=lint_tasks, default=True, follows=("lint",),
             done=lambda name, values: Done({"linted": (name,)}),
             closing=lambda seen: [f"[lint] {len(seen.tallied('linted'))} sub-build(s) linted"],
             summary=lambda seen: [(2, f"{len(seen.tallied('linted'))} linted")],
             explain=lambda name, status, reason, values: f"{reason} (lint's words)",
             forced="lint looks again")
WITH_LINT = (*build_stages.STAGES, LINT)


def run_with(root: Path, stages_: tuple, **kw) -> str:
    request = Request.given(platform="host", **kw)
    out = io.StringIO()
    loader = BuildDirLoader(root, graph=request.plan(root), caches=request.caches(), run=request.run,
                            reporter=BuildReporter(out, stages=stages_), stages=stages_, force=request.force)
    assert run_build(loader, recompile=request.recompile) == 0
    return out.getvalue()


def test_a_stage_the_engine_never_named_is_built_reported_and_explained(tmp_path):
    """A fake stage handed to the engine: its tasks run by default, its successes tally into its closing line
    and its summary part, explain judges it by its own rule (after the stamp that runs) in its own words."""
    root = synth.write_l2(tmp_path / "d", kernels=2)
    said = run_with(root, WITH_LINT).splitlines()
    assert any(line.startswith("lint:.  (") for line in said) and "[lint] 1 sub-build(s) linted" in said
    assert said[-1] == "pypto-build: 3 compiled, 0 up to date, 1 stamp(s) written, 1 linted"
    from pypto_build.plan.graph import load_graph
    assert {e.task: e.status for e in explain(load_graph(root), stages=WITH_LINT)}["lint:."] == "up-to-date"
    edit(root / "kernels/aiv/main_incore_1_aiv.cpp", "\nint lint_probe() { return 1; }\n")     # new bytes
    found = {e.task: e.reason for e in explain(load_graph(root), stages=WITH_LINT) if e.status == "run"}
    assert found["stamp:."] == "after compile:aiv/main_incore_1_aiv"
    assert found["lint:."] == "after stamp:. (lint's words)"
    assert run_with(root, WITH_LINT).splitlines()[-1] == "pypto-build: 1 compiled, 2 up to date, " \
        "1 stamp(s) written, 1 linted"
    # the build's own stages alone: no lint task, no lint line
    assert "lint" not in run_with(root, build_stages.STAGES)
    # a run that forces the stage's tasks says why in the stage's words (`Stage.forced`), not the engine's
    assert "lint:.  (lint looks again)" in run_with(root, WITH_LINT, force=("lint:",)).splitlines()


def test_the_table_lists_every_group_in_graph_order():
    assert [g for s in build_stages.STAGES for g in s.groups] == list(stages.ALL)
    assert [g for s in build_stages.STAGES if s.default for g in s.groups] == [stages.STAMP]


STAGE_NAMES = {n for n in vars(stages) if n.isupper() and n != "CHECK_SIGNATURE"}


def test_no_engine_module_names_a_stage():
    """The engine assembles the stages it is given: no engine module imports the stage names
    (`core/stages`) or a stage's code (its package's tasks, actions, checks), names a stage's constant or
    spells a stage's name; the build's table (`build_stages`) is the one the engine is handed by default."""
    from test_imports import import_graph
    stage_code = ("pypto_build.core.stages", "pypto_build.pto", "pypto_build.run", "pypto_build.compile.stage",
                  "pypto_build.compile.actions", "pypto_build.compile.checks", "pypto_build.compile.steps",
                  "pypto_build.compile.prelude_actions")
    found = sorted(f"{m} imports {d}" for m, deps in import_graph().items() if m.startswith("pypto_build.engine")
                   for d in deps if d.startswith(stage_code))
    spelled = {v for v in vars(stages).values() if isinstance(v, str)}
    for path in sorted(ENGINE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        options = {id(n) for a in ast.walk(tree) if isinstance(a, ast.Assign)      # option names (`--ptoas`)
                   and "GRAPH_OPTIONS" in ast.unparse(a.targets[0]) for n in ast.walk(a.value)}
        for node in ast.walk(tree):
            if id(node) in options:
                continue
            if isinstance(node, ast.Attribute) and node.attr in STAGE_NAMES and ast.unparse(node.value) == "stages":
                found.append(f"{path.name} names {node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    (node.value in spelled or node.value.partition(":")[0] + ":" in map(stages.prefix, spelled)):
                found.append(f"{path.name} spells {node.value!r}")
    assert found == []


@pytest.mark.parametrize("recompile", [False, True])
def test_explain_says_what_the_build_then_does(tmp_path, recompile):
    """explain's reasons are the build's: every task it says runs, the build runs, for that reason (a task run
    after one that runs excepted: the build sees the rewritten input itself); with --recompile, an edited
    kernel is forced as the build forces it (explain said "changed: ..." before, the build "forced by")."""
    from pypto_build.plan.graph import load_graph
    root = synth.write_l2(tmp_path / "d", kernels=3)
    build(root)
    edit(root / "kernels/aiv/main_incore_1_aiv.cpp", "\n// edited\n")
    (root / "orchestration/main.cpp").write_text((root / "orchestration/main.cpp").read_text() + "\n// o\n")
    said = {e.task: e.reason for e in explain(load_graph(root), recompile=recompile) if e.status == "run"}
    result = build(root, recompile=recompile)
    ran = {u.task: u.reason for u in result.units if u.status in ("ran", "from-cache")}
    assert set(said) == set(ran)
    assert {t: r for t, r in said.items() if not r.startswith("after ")} == \
        {t: r for t, r in ran.items() if not said[t].startswith("after ")}
    if recompile:
        assert {r for r in said.values() if not r.startswith("after ")} == {"forced by --recompile"}


def test_a_dry_run_is_doits_own_run_with_a_runner_that_executes_nothing(tmp_path):
    """explain dispatches through doit's TaskControl / Runner: it reads no task list of its own and keeps no
    table of which stage follows which."""
    text = (ENGINE / "explanation.py").read_text(encoding="utf-8")
    assert "TaskControl(" in text and "Runner" in text and "_PROPAGATING" not in text and "def _ordered" not in text
    root = synth.write_l2(tmp_path / "d", kernels=1)
    from pypto_build.plan.graph import load_graph
    lines = format_lines(explain(load_graph(root)))
    assert lines[-1] == "pypto-build: 2 would compile, 0 up to date, also 1 stamp"
