"""A program that crashes or hangs is a failed run, not a dead tool (issue 11, items 8 and 9).

Kernels and orchestrations below really segfault, abort, call exit() or loop forever
(code injected into the generated C++, built by g++, run by the host runtime in the
replay's child process). Each is one line naming the program, what was running and the
signal or exit status; the tool exits 1; nothing is left running; ci goes on.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from conftest import copy_dir, inject
from pypto_build.testing import synth
from pypto_build.errors import ProgramFailed
from pypto_build.run.golden import load_golden
from pypto_build.compat.pypto_replay import replay

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow
HEADERS = "#include <cstdlib>\n#include <csignal>\n#include <unistd.h>"
KERNEL1 = "task 1 (main_incore_1_aiv, func_id 1) from main_incore_1_aiv.so"

CRASHES = {
    "segfault": ("{ volatile int* p = nullptr; *p = 1; }", r"was killed by SIGSEGV while running " + re.escape(KERNEL1)),
    "abort": ("abort();", r"was killed by SIGABRT while running " + re.escape(KERNEL1)),
    "exit(0)": ("exit(0);", r"exited with status 0 before reporting a result .* while running " + re.escape(KERNEL1)),
    "exit(3)": ("exit(3);", r"exited with status 3 before reporting a result .* while running " + re.escape(KERNEL1)),
}


def run(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def crashing(root: Path, how: str) -> Path:
    inject(synth.kernel_path(root, 1), CRASHES[how][0], includes=HEADERS)
    return root


def children_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


# every way of crashing through validate; the other verbs run the same child process: one each
@pytest.mark.parametrize("how, verb", [*((how, ["validate"]) for how in CRASHES),
                                       ("segfault", ["replay", "--validate"]), ("exit(0)", ["replay"])])
def test_a_crashing_kernel_is_one_failed_line(g, how, verb):
    crashing(g, how)
    out = run(*verb, str(g))
    assert out.returncode == 1, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("pypto-build: FAILED "), out.stderr
    assert f"the program of {g}" in lines[0] and re.search(CRASHES[how][1], lines[0]), lines[0]
    assert "Traceback" not in out.stderr and "PASSED" not in out.stdout


def test_a_crashing_orchestration_is_named(g):
    orch = g / "orchestration" / "main.cpp"
    text = orch.read_text()
    entry = text.index("aicpu_orchestration_entry")
    brace = text.index("{", entry) + 1
    orch.write_text("#include <cstdlib>\n" + text[:brace] + "\n    abort();\n" + text[brace:])
    out = run("validate", str(g))
    assert out.returncode == 1
    assert "was killed by SIGABRT while running the orchestration main.so" in out.stderr


def test_the_api_raises_program_failed_and_keeps_the_callers_tensors(g):
    crashing(g, "segfault")
    pairs = load_golden(g).inputs()
    args = [v for _, v in pairs]
    before = [a.clone() for a in args]
    with pytest.raises(ProgramFailed, match="killed by SIGSEGV"):
        replay(g, *args, validate=True, progress=None)
    assert all(torch.equal(a, b) for a, b in zip(args, before))


def test_a_hanging_kernel_is_stopped_by_the_timeout(g):
    inject(synth.kernel_path(g, 1), "for (;;) sleep(1);", includes=HEADERS)
    out = run("validate", "--run-timeout", "8", str(g))
    assert out.returncode == 1
    assert f"did not finish within 8 s (while running {KERNEL1}) and was stopped" in out.stderr
    assert "raise --run-timeout / PYPTO_RUN_TIMEOUT" in out.stderr
    out = run("replay", str(g), env={"PYPTO_RUN_TIMEOUT": "8"})
    assert out.returncode == 1 and "did not finish within 8 s" in out.stderr


@pytest.mark.parametrize("value", ["0", "-3", "soon", "nan", "inf"])
def test_a_bad_run_timeout_is_one_line(g, value):
    out = run("validate", str(g), env={"PYPTO_RUN_TIMEOUT": value})
    assert out.returncode == 2
    assert out.stderr.strip().startswith(f"pypto-build: error: PYPTO_RUN_TIMEOUT={value!r}: is ")
    assert out.stderr.strip().endswith("set it to a positive number of seconds (e.g. PYPTO_RUN_TIMEOUT=1800, "
                                       "the default) or unset it")
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_a_hanging_program_and_leaves_nothing(g, sig):
    inject(synth.kernel_path(g, 1), "for (;;) sleep(1);", includes=HEADERS)
    run("build", str(g))
    proc = subprocess.Popen(["pypto-build", "replay", str(g)], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    child = None
    while child is None and time.monotonic() < deadline:            # wait until the kernel is running
        time.sleep(0.2)
        kids = children_of(proc.pid)
        child = kids[0] if kids and "pypto_build.run.child" in Path(f"/proc/{kids[0]}/cmdline").read_text() else None
    assert child is not None, "the child process never started"
    time.sleep(3)                                                    # torch imported, the kernel spinning
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)                                     # a terminal's Ctrl-C
    else:
        os.kill(proc.pid, sig)                                       # kill PID: the tool alone
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the program's process outlived the tool"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ci_goes_on_past_a_crash_and_writes_complete_reports(built_golden, tmp_path, jobs):
    good = copy_dir(built_golden, tmp_path / "good")
    bad = crashing(copy_dir(built_golden, tmp_path / "bad"), "segfault")
    last = copy_dir(built_golden, tmp_path / "last")
    junit, report = tmp_path / "r.xml", tmp_path / "r.json"
    out = run("ci", "-q", "-j", jobs, str(good), str(bad), str(last), "--junit-xml", str(junit),
              "--json", str(report))
    assert out.returncode == 1
    assert out.stdout.splitlines()[-1] == "pypto-build ci: 2 ok, 1 failed"
    data = json.loads(report.read_text())
    assert [d["ok"] for d in data["directories"]] == [True, False, True]
    assert "killed by SIGSEGV" in data["directories"][1]["error"]
    cases = {c.get("name"): c.find("failure") for c in ET.parse(junit).getroot().findall("testcase")}
    assert cases[str(good)] is None and cases[str(last)] is None
    assert "killed by SIGSEGV" in cases[str(bad)].get("message")
