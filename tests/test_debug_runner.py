"""debug/run.py (issue 33): written into `pypto-build example` copies, emitted for L3 directories and run there on
the host runtime, no `{placeholder}` left in it, one line naming the interpreter when run without torch or
pypto_build, and a failing `_user_compare` named as such."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import pypto_build
from pypto_build.builddir.sidecars import load_compiled_meta
from pypto_build.compat.runner import render_run_script, write_run_script

EXAMPLES = Path(pypto_build.__file__).resolve().parent / "examples"
PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}")       # `{this_file}`: a format field nothing filled in


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYPTO_EMIT_DEBUG_RUNNER")}


def _no_op_replays(monkeypatch) -> list[Path]:
    """`pypto-build example` with its replays answered ok at once: the copy is what is tested."""
    from pypto_build import pipeline

    replayed: list[Path] = []

    def fake_run(dest, _request, **_kw):
        replayed.append(Path(dest))
        return SimpleNamespace(ok=True, failures=[], status=0)

    monkeypatch.setattr(pipeline, "run", fake_run)
    return replayed


# -- item 5: placeholders, no torch, _user_compare ----------------------------------
def test_no_format_placeholder_survives(tmp_path):
    meta = load_compiled_meta(EXAMPLES / "matmul_relu" / "compiled_meta.json")
    script = tmp_path / "jit" / "debug" / "run.py"
    text = render_run_script(meta, script)
    assert not PLACEHOLDER.findall(text), PLACEHOLDER.findall(text)
    assert f"    python {script}\n" in text and f"usage: python {script}" in text
    assert f"  python {script} --no-validate" in text
    compile(text, "run.py", "exec")


def _python_without_torch() -> str:
    for python in ("/usr/bin/python3", shutil.which("python3", path="/root/.pyenv/shims:/usr/local/bin:/usr/bin")):
        if python and os.access(python, os.X_OK) and subprocess.run(
                [python, "-c", "import torch"], capture_output=True, env=_clean_env(), timeout=120).returncode:
            return python
    pytest.skip("no python3 without torch on this machine")


def test_run_without_torch_names_the_interpreter_in_one_line(tmp_path):
    python = _python_without_torch()
    root = tmp_path / "ex1"
    shutil.copytree(EXAMPLES / "matmul_relu", root)
    script = write_run_script(root)
    done = subprocess.run([python, str(script)], capture_output=True, text=True, cwd="/", env=_clean_env(),
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith("pypto-build: debug/run.py needs pypto_build and torch: run it with ")
    assert sys.executable in line and "Traceback" not in line and f"not {python}" in line


def test_a_failing_user_compare_is_named(tmp_path, monkeypatch, capsys):
    from pypto_build.compat import pypto_replay
    from pypto_build.compat.runner_main import main

    monkeypatch.setattr(pypto_replay, "replay", lambda *_a, **_kw: None)

    def _user_compare():
        raise AssertionError("my check failed")

    assert main([str(tmp_path)], inline_inputs=list, user_compare=_user_compare) == 1
    err = capsys.readouterr().err
    assert "pypto-build: _user_compare in debug/run.py failed: my check failed" in err, err


# -- item 3: the example copies carry one ------------------------------------------
@pytest.mark.parametrize("flags, pto", [([], False), (["--l3"], False), (["--pto"], True)])
def test_example_copies_get_a_debug_run_py(tmp_path, monkeypatch, capsys, flags, pto):
    from pypto_build.cli.main import main

    monkeypatch.delenv("PYPTO_EMIT_DEBUG_RUNNER", raising=False)
    _no_op_replays(monkeypatch)
    dest = tmp_path / "ex"
    assert main(["example", *flags, str(dest)]) == 0
    script = dest / "debug" / "run.py"
    assert script.is_file() and os.access(script, os.X_OK)
    assert not (EXAMPLES / "matmul_relu" / "debug").exists()         # written, not copied
    text = script.read_text()
    assert "_user_compare" in text and not PLACEHOLDER.findall(text)
    assert ("'--ptoas', str(_WORK_DIR / 'standin_ptoas/ptoas')" in text) is pto
    assert f"wrote {script.resolve()}" in capsys.readouterr().out


def test_example_copy_without_debug_run_py_when_disabled(tmp_path, monkeypatch):
    from pypto_build.cli.main import main

    monkeypatch.setenv("PYPTO_EMIT_DEBUG_RUNNER", "0")
    _no_op_replays(monkeypatch)
    assert main(["example", str(tmp_path / "ex")]) == 0
    assert (tmp_path / "ex" / "golden.py").is_file() and not (tmp_path / "ex" / "debug").exists()
    monkeypatch.setenv("PYPTO_EMIT_DEBUG_RUNNER", "maybe")                  # refused before anything is copied
    assert main(["example", str(tmp_path / "ex2")]) == 2
    assert not (tmp_path / "ex2").exists()


# -- item 4: L3 ----------------------------------------------------------------------
def test_emit_runner_writes_an_l3_directory(tmp_path, capsys):
    from pypto_build.testing import synth
    from pypto_build.cli.main import main

    l3 = synth.write_l3(tmp_path / "l3")
    assert main(["emit-runner", str(l3)]) == 0
    text = (l3 / "debug" / "run.py").read_text()
    assert "distributed (L3) program" in text and "distributed_meta.json" in text
    assert "wrote" in capsys.readouterr().out


@pytest.mark.slow
def test_l3_debug_run_py_runs_on_the_host_runtime(tmp_path):
    """`pypto-build example --l3` writes it; it validates with golden.py, and runs its inline inputs and
    `_user_compare` with --no-validate, on the host runtime."""
    env = {**_clean_env(), "PYTHONPATH": str(Path(pypto_build.__file__).resolve().parents[1])}
    made = subprocess.run([sys.executable, "-m", "pypto_build", "example", "--l3", "-j", "2", "l3"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    script = tmp_path / "l3" / "debug" / "run.py"
    done = subprocess.run([sys.executable, str(script), "--platform", "host"], capture_output=True, text=True,
                          cwd="/", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Golden validation: PASSED" in done.stdout and "2 rank(s)" in done.stdout
    stub = "    return  # TODO: add your comparison here"
    hook = "    print('HOOK', tuple(out.shape), bool(out.abs().sum() > 0))"
    script.write_text(script.read_text().replace(stub, hook))
    done = subprocess.run([sys.executable, str(script), "--no-validate"], capture_output=True, text=True,
                          cwd="/", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "HOOK (2, 16) True" in done.stdout and "Golden validation" not in done.stdout
