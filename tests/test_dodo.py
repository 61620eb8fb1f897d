"""The project's own doit tasks do not break its tests (issue 22, item 11)."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git

ROOT = Path(__file__).resolve().parent.parent


def dodo():
    spec = importlib.util.spec_from_file_location("project_dodo", ROOT / "dodo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_doit_test_runs_the_readmes_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = re.search(r"&& \.venv/bin/python (-m pytest [^\n`]*)", readme).group(1).strip()
    project = dodo()
    assert project.task_test()["actions"] == [f"{project.PYTHON} {command}"]
    assert "-n 2" in command


@pytest.mark.slow
def test_doit_lint_writes_nothing_into_the_tree(tmp_path):
    """`doit lint` on a copy of the tracked files (a git repository of its own): it passes and leaves no
    file behind but doit's own state (compileall wrote the examples' `__pycache__`, which the examples'
    tests then found)."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs the project's git checkout (lint lists the files with git ls-files)")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    copy = tmp_path / "project"
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    before = {p for p in copy.rglob("*") if ".git" not in p.relative_to(copy).parts}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([str(Path(sys.executable).with_name("doit")), "lint"], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    after = {p for p in copy.rglob("*") if ".git" not in p.relative_to(copy).parts}
    added = sorted(p.relative_to(copy).as_posix() for p in after - before)
    assert not [a for a in added if not a.startswith((".doit.db", "__pycache__"))], added
    assert not list((copy / "pypto_build" / "examples").rglob("__pycache__"))
