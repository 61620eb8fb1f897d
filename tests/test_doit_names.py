"""The names pypto_build adds to doit break no other doit project (issue 22, item 1).

A doit command name is global: doit refuses every dodo.py, in any project of the environment, whose
task has that name. A real second project with tasks `build`, `validate`, `auto` and `watch` is run
through the venv's `doit` (pypto_build installed) and through the same doit with no plugin at all
(doit alone on `sys.path`): the lines and exit statuses are the same.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import doit
import pytest

from conftest import copy_dir, edit
from pypto_build.cli.doit_plugins import NAMES
from pypto_build.testing import synth

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"

DODO = '''\
DOIT_CONFIG = {"verbosity": 2}


def task_build():
    return {"actions": ["echo built > out.txt"], "targets": ["out.txt"]}


def task_validate():
    return {"actions": ["echo validated"], "task_dep": ["build"]}


def task_auto():
    return {"actions": ["echo auto ran"]}


def task_watch():
    return {"actions": ["echo watch ran"]}
'''


def doit_alone(tmp_path: Path) -> list[str]:
    """A `doit` that sees no plugin: doit's package and its metadata alone on sys.path (`-S`: no site)."""
    alone = tmp_path / "doit_alone"
    if not alone.exists():
        source = Path(doit.__file__).resolve().parent
        shutil.copytree(source, alone / "doit", ignore=shutil.ignore_patterns("__pycache__"))
        info = next(f for f in distribution("doit").files if f.name == "METADATA").locate().parent
        shutil.copytree(info, alone / info.name)
    return [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(alone)!r}); "
            "from doit.doit_cmd import DoitMain; sys.exit(DoitMain().run(sys.argv[1:]))"]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "other_project"
    root.mkdir()
    (root / "dodo.py").write_text(DODO, encoding="utf-8")
    return root


COMMANDS = [[], ["list"], ["build"], ["validate"], ["auto"], ["watch"], ["list", "--all", "--status"],
            ["info", "build"], ["forget", "build"], ["run", "build"], ["clean", "build"]]


def test_another_project_with_build_validate_auto_watch_tasks_works_as_without_pypto_build(project, tmp_path):
    with_plugins = [str(Path(sys.executable).with_name("doit"))]
    alone = doit_alone(tmp_path)
    twin = tmp_path / "twin"
    shutil.copytree(project, twin)
    for argv in COMMANDS:
        ours, theirs = run(with_plugins + argv, project), run(alone + argv, twin)
        assert (ours.returncode, ours.stdout, ours.stderr) == (theirs.returncode, theirs.stdout, theirs.stderr), argv
        assert ours.returncode == (1 if argv[:1] == ["info"] else 0), (argv, ours.stderr)   # info: 1 = stale
        assert "pypto-build" not in ours.stdout + ours.stderr
    assert (project / "out.txt").read_text() == "built\n"
    listed = run(with_plugins + ["list"], project).stdout.split()
    assert listed == ["auto", "build", "validate", "watch"]
    assert "watch ran" in run(with_plugins + ["watch"], project).stdout
    assert "auto ran" in run(with_plugins + ["auto"], project).stdout


def test_every_name_added_to_doit_is_replay_or_hyphenated_and_documented():
    """The installed entry points are NAMES; only `replay` is a name a `task_*` function could have; the
    guide lists each name with what it can clash with."""
    installed = {ep.name for ep in distribution("pypto_build").entry_points if ep.group == "doit.COMMAND"}
    assert installed == set(NAMES)
    assert [name for name in NAMES if name.isidentifier()] == ["replay"]
    guide = GUIDE.read_text(encoding="utf-8")
    section = guide.split("### Names added to doit", 1)[1].split("\n#", 1)[0]
    for name in NAMES:
        assert re.search(rf"^\| `{re.escape(name)}` \|", section, re.M), name


def test_a_task_named_replay_is_the_documented_clash(project):
    """The one plain name: a project with a `replay` task is refused by doit, as the guide says."""
    dodo = project / "dodo.py"
    dodo.write_text(dodo.read_text() + "\n\ndef task_replay():\n    return {'actions': ['echo r']}\n")
    out = run([str(Path(sys.executable).with_name("doit")), "list"], project)
    assert out.returncode == 3 and "Task can't be called 'replay' because this is a command name" in out.stderr
    assert "Task can't be called 'replay'" in GUIDE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_doit_replay_and_the_hyphenated_commands_work_in_a_build_directory(built_golden, tmp_path):
    """`cd DIR && doit replay` is the mission's entry point; `doit pypto-build` builds; `doit help` lists all."""
    pytest.importorskip("torch")
    l2 = copy_dir(built_golden, tmp_path / "g")
    doit_bin = str(Path(sys.executable).with_name("doit"))
    listed = run([doit_bin, "help"], l2).stdout
    for name in NAMES:
        assert re.search(rf"^  doit {re.escape(name)} ", listed, re.M), name
    edit(synth.kernel_path(l2, 2))
    built = run([doit_bin, "pypto-build"], l2)
    assert built.returncode == 0, built.stderr
    assert "compile:aic/main_incore_2_aic" in built.stdout and "1 compiled" in built.stdout
    replayed = run([doit_bin, "replay"], l2)
    assert replayed.returncode == 0, replayed.stderr
    assert "0 compiled" in replayed.stdout
