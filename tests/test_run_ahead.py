"""A run begun while the compiler runs (issue 35): golden.py's half of a `replay --validate` is made meanwhile,
and it never uses an input or a golden result that changed before the binaries were there.

The compile launchers here are stand-ins written by the tests (labelled as such in their text): each holds the
compile of the edited kernel until golden.py's generate_inputs has run (at most `HOLD_S`), may then change an
input of golden.py, and runs the compile it was given. So the overlap is seen as an order of events, never as a
time: with the run begun only after the build, generate_inputs could not run before the compile finished.
Real g++, real doit, real child processes, real files.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir, edit
from pypto_build.testing import synth

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

HOLD_S = 20
MARK = '''

from pathlib import Path as _MarkPath
_generate_unmarked = generate_inputs


def generate_inputs(params):
    with open(_MarkPath(__file__).resolve().parent.parent / "marks.txt", "a") as handle:
        handle.write("inputs %d\\n" % __import__("os").getpid())
    return _generate_unmarked(params)
'''
LAUNCHER = '''#!{python}
"""Stand-in compile launcher written by tests/test_run_ahead.py (not a real tool): holds the compile until
golden.py's generate_inputs has run (at most {hold} s), then {then}, then runs the compile it was given."""
import pathlib, subprocess, sys, time
marks, log = pathlib.Path({marks!r}), pathlib.Path({log!r})
deadline = time.monotonic() + {hold}
while time.monotonic() < deadline and not (marks.exists() and "inputs" in marks.read_text()):
    time.sleep(0.02)
with open(log, "a") as handle:
    handle.write(("seen" if marks.exists() and "inputs" in marks.read_text() else "not seen") + "\\n")
{action}
sys.exit(subprocess.call(sys.argv[1:]))
'''


def marked(root: Path) -> Path:
    """golden.py made to note each generate_inputs call (and its process) in marks.txt beside the directory."""
    with open(root / "golden.py", "a", encoding="utf-8") as handle:
        handle.write(MARK)
    return root


def launcher(where: Path, root: Path, then: str = "nothing else", action: str = "") -> tuple[Path, Path]:
    """The stand-in launcher, waiting for the marks of the golden.py at `root` (`marked`)."""
    script, log = where / "stand-in-launcher", where / "launcher.log"
    script.write_text(LAUNCHER.format(python=sys.executable, hold=HOLD_S, marks=str(root.parent / "marks.txt"),
                                      log=str(log), then=then, action=action))
    script.chmod(0o755)
    return script, log


def replay(root: Path, script: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", "replay", "--validate", "--launcher", str(script), *extra, str(root)],
                          capture_output=True, text=True, timeout=300)


def new_binary(root: Path) -> None:
    """A new binary for kernel 0, the same numbers (another unused function each time)."""
    path = synth.kernel_path(root, 0)
    edit(path, f"\nint run_ahead_test_unused_{path.read_text().count('run_ahead_test')}() {{ return 7; }}\n")


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return marked(copy_dir(built_golden, tmp_path / "g"))


def test_golden_py_runs_while_the_edited_kernel_compiles(g, tmp_path):
    """Cold (no kept golden result) and warm (kept: generate_inputs makes the inputs again to check their
    digests), the child has run generate_inputs before the compile of the edited kernel finished."""
    script, log = launcher(tmp_path, g)
    for round_ in (1, 2):
        (g.parent / "marks.txt").unlink(missing_ok=True)
        new_binary(g)
        done = replay(g, script)
        assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
        assert log.read_text().splitlines()[-1] == "seen", f"round {round_}: the compile finished first"
    assert "golden: cached" in done.stdout and "generate_inputs() made the same inputs" in done.stdout


def test_an_input_changed_while_the_program_builds_is_the_one_used(g, tmp_path):
    """data/in/a.pt (an input golden.py loads) is rewritten after the child prepared and before the compile
    finishes: the child prepares again, so the run and the verdict are on the new input, and the kept result is
    the new one."""
    from pypto_build.run import golden_cache
    from pypto_build.run.golden import load_golden

    (g / "data" / "in").mkdir(parents=True)
    torch.save(torch.full((16,), 2.0), g / "data" / "in" / "a.pt")
    text = (g / "golden.py").read_text()
    old = "    a = torch.randn((16,), generator=gen, dtype=torch.float32)\n"
    assert old in text
    (g / "golden.py").write_text(text.replace(old, '    a = torch.load(__import__("pathlib").Path(__file__).parent'
                                                   ' / "data" / "in" / "a.pt", weights_only=True)\n'))
    assert replay(g, launcher(tmp_path, g)[0]).returncode == 0         # a kept result for the old input
    new = g / "data" / "in" / "a.pt"
    script, log = launcher(tmp_path, g, "rewrites data/in/a.pt",
                           f"import torch; torch.save(torch.full((16,), 3.0), {str(new)!r})")
    (g.parent / "marks.txt").unlink()
    new_binary(g)
    done = replay(g, script)
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
    assert log.read_text().splitlines()[-1] == "seen"
    assert "golden: prepared again (data/in/a.pt changed while the program was built)" in done.stdout
    golden = load_golden(g)
    named = dict(golden.inputs())
    assert torch.equal(named["a"], torch.full((16,), 3.0))
    expected = golden.expected(named)
    out = torch.load(g / ".pypto_build" / "replay" / "out.pt")
    assert torch.equal(out, expected["out"]) and not torch.equal(out, golden.expected(
        {**named, "a": torch.full((16,), 2.0)})["out"])                  # the new input's result, not the old one's
    entry, why = golden_cache.lookup(g)
    assert why is None and entry.same_inputs(list(named.values()))


def test_a_golden_py_fixed_while_the_program_builds_is_the_one_run(g, tmp_path):
    """golden.py fails when the child first prepares; the user fixes it before the compile finishes: the run
    prepares again and passes, as a run begun after the build would."""
    text = (g / "golden.py").read_text()
    broken = text.replace("    return _generate_unmarked(params)\n",
                          "    raise RuntimeError('not yet')\n", 1)
    assert broken != text
    (g / "golden.py").write_text(broken)
    fix = g / "golden.py"
    script, log = launcher(tmp_path, g, "puts golden.py right", f"open({str(fix)!r}, 'w').write({text!r})")
    new_binary(g)
    done = replay(g, script)
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
    assert log.read_text().splitlines()[-1] == "seen"


def test_a_run_begun_for_a_build_that_fails_is_stopped(g, tmp_path):
    """The compile fails: the run begun ahead is never taken, and its process is gone when the command returns."""
    script, log = launcher(tmp_path, g, "fails the compile", "sys.exit(1)")
    new_binary(g)
    done = replay(g, script)
    assert done.returncode == 1 and "Golden validation" not in done.stdout, done.stdout + done.stderr
    assert log.read_text().splitlines()[-1] == "seen"
    pid = int((g.parent / "marks.txt").read_text().split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_l3_run_is_begun_ahead_too(built_l3, tmp_path):
    """An L3 directory's run (the host driver over its chips) prepares while its chips' kernels compile."""
    root = synth.write_l3(tmp_path / "l3", golden=True)
    marked(root)
    script, log = launcher(tmp_path, root)
    done = replay(root, script)
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
    assert log.read_text().splitlines()[0] == "seen"


def test_each_sub_build_of_a_multi_orch_parent_is_run(tmp_path):
    """A multi-orchestration parent's `replay` tasks: the first sub-build's run is begun while its kernels compile,
    the next when the first is taken; both run, each on its own golden.py's inputs."""
    root = synth.write_multi_orch(tmp_path / "m", golden=True)
    subs = sorted((root / "next_levels").iterdir())
    for sub in subs:
        marked(sub)
    script, log = launcher(tmp_path, subs[0])
    done = subprocess.run(["pypto-build", "doit", "run", str(root), "replay"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYPTO_BUILD_LAUNCHER": str(script)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text().splitlines()[0] == "seen"
    assert len((root / "next_levels" / "marks.txt").read_text().split("inputs")) == 3      # once per sub-build
    for sub in subs:
        assert [p.name for p in (sub / ".pypto_build" / "replay").iterdir()] == ["out.pt"]


def test_a_golden_result_that_could_not_be_keyed_is_made_again(g, tmp_path):
    """generate_inputs rewrites a file of the sub-build while it runs, so its result has no key to check later:
    the run begun ahead cannot prove what it prepared still holds, and prepares again once the binaries are
    there."""
    text = (g / "golden.py").read_text()
    (g / "data").mkdir(exist_ok=True)
    (g / "data" / "note.txt").write_text("0")
    stamp = ('    (_MarkPath(__file__).parent / "data" / "note.txt").write_text(str(__import__("time").time_ns()))\n'
             "    return _generate_unmarked(params)\n")
    (g / "golden.py").write_text(text.replace("    return _generate_unmarked(params)\n", stamp, 1))
    script, log = launcher(tmp_path, g)
    new_binary(g)
    done = replay(g, script)
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
    assert log.read_text().splitlines()[-1] == "seen"
    assert ("golden: prepared again (its result could not be keyed: data/note.txt changed while golden.py ran)"
            in done.stdout), done.stdout


CASES = {
    "passes": lambda g: None,
    "a wrong kernel": lambda g: synth.kernel_path(g, 1).write_text(
        synth.kernel_path(g, 1).read_text().replace("0.5f", "0.75f")),
    "generate_inputs raises": lambda g: (g / "golden.py").write_text(
        (g / "golden.py").read_text().replace("    return _generate_unmarked(params)\n",
                                              "    raise RuntimeError('no inputs today')\n", 1)),
    "an input the sidecar refuses": lambda g: (g / "golden.py").write_text(
        (g / "golden.py").read_text().replace("    return _generate_unmarked(params)\n",
                                              "    return _generate_unmarked(params)[:1]\n", 1)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_run_begun_ahead_gives_what_a_run_begun_by_its_task_gives(built_golden, tmp_path, case):
    """The same directory, once with its run begun while the compiler runs (`-j 1`) and once begun only when
    its task runs (`-j 2`: doit's workers run it, nothing is begun ahead): the same exit status, the same
    verdict or refusal line, and the same kept outputs and golden result, byte for byte."""
    seen = []
    for jobs in ("1", "2"):
        g = marked(copy_dir(built_golden, tmp_path / f"j{jobs}"))
        CASES[case](g)
        new_binary(g)
        done = subprocess.run(["pypto-build", "replay", "--validate", "-j", jobs, str(g)], capture_output=True,
                              text=True, timeout=300)
        said = [line.replace(str(g), "DIR") for line in (done.stdout + done.stderr).splitlines()
                if "Golden validation" in line or "error" in line.lower() or "FAILED" in line]
        kept = {p.relative_to(g).as_posix(): p.read_bytes() for folder in ("replay", "golden")
                for p in sorted((g / ".pypto_build" / folder).glob("*.pt"))}
        seen.append((done.returncode, said, kept))
    assert seen[0] == seen[1] and seen[0][1], seen
    assert seen[0][0] == {"passes": 0, "a wrong kernel": 1, "generate_inputs raises": 1,
                          "an input the sidecar refuses": 1}[case]
